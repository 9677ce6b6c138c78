"""Parquet sink: staged per-bucket parts, atomic publish, upsert by row_id, already-done lookups.

Layout (hive-partitioned by run_date; readable with polars `scan_parquet(..., hive_partitioning=True)`
and DuckDB `read_parquet(..., hive_partitioning=true)`):

    OUTPUT/documents/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/account_windows/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/transactions/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/errors/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/manifests/run_date=YYYY-MM-DD/manifest-<run_key>.json
    OUTPUT/_staging/<run_key>/...          (work in progress; never read by queries)

Protocol:
1. `Staging(output, run_key)`: every finished bucket writes its parts (tmp file + rename) and then
   a `done/<bucket>` marker, so a run killed at any point leaves only whole buckets behind; a re-run
   with the same run key reuses them (buckets are deterministic, so the rows are the same).
2. `commit(manifest)`: writes the publish plan (`COMMIT.json`) atomically. From then on the run
   counts as done, and `recover()` can finish its publication after a crash.
3. publish, per dataset partition it changes: the partition's next version is built beside the live one
   (unchanged parts hard-linked, parts holding replaced row_ids or rows the run retires — older versions of the
   files it read, `pipeline.output.supersede` — rewritten without them, the new parts added),
   then swapped in by one atomic rename (renameat2 RENAME_EXCHANGE; two renames where the filesystem cannot).
   A reader sees the old version or the new one, never a mix. The manifest is written last; the staging
   directory is renamed out of the recovery scan before it is deleted. Each step is idempotent, so rolling
   forward after a crash at any point is safe. The upsert spans all dates (a retried unit never appears twice),
   except for `--force`, which changes only its own run_date's partitions.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.identity import stable_id
from pipeline.output.atomic import write_atomic, write_text_atomic
from pipeline.output.datasets import DATASETS, dataset_schema
from pipeline.output.supersede import (
    Supersede,
    columns_for,
    dictionary_columns,
    retire_rule,
)
from pipeline.row_groups import row_group_batches

STAGING = "_staging"
MANIFESTS = "manifests"
COMMIT = "COMMIT.json"
TRASH = ".trash-"
COMPRESSION = "zstd"


class OutputError(RuntimeError):
    """The output directory cannot take the run's rows (disk full, read-only, not a directory). Nothing
    published is lost: staged buckets stay for the re-run, published partitions are untouched."""


_OUTPUT_ERRNO = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EROFS: "read-only filesystem",
                 errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
                 errno.ENOTDIR: "a parent of it is not a directory", errno.EISDIR: "it is a directory",
                 errno.EIO: "input/output error"}


def describe_output_error(exc: OSError, where: Path | str) -> OutputError:
    """One line: what went wrong and where (pyarrow's IO errors carry no errno, only the message)."""
    reason = _OUTPUT_ERRNO.get(exc.errno or 0)
    if reason is None:
        text = str(exc).lower()
        reason = next((r for code, r in _OUTPUT_ERRNO.items() if os.strerror(code).lower() in text), None)
    reason = reason or (exc.strerror or str(exc))
    return OutputError(f"cannot write the output at {where}: {reason}")


@contextmanager
def writing(where: Path | str) -> Iterator[None]:
    """Turn an OSError while writing output into an `OutputError` naming the place."""
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        raise describe_output_error(exc, getattr(exc, "filename", None) or where) from exc


def _output_io(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: the function writes output; its OSErrors become `OutputError`s."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        where = next((a for a in args if isinstance(a, Path)), getattr(args[0] if args else None, "root", None))
        with writing(where or "the output directory"):
            return fn(*args, **kwargs)
    return wrapper


def check_output_dir(output_dir: Path) -> None:
    """Fail fast, before any work, if the output directory cannot be written."""
    if output_dir.exists() and not output_dir.is_dir():
        raise OutputError(f"cannot write the output at {output_dir}: it exists and is not a directory")
    with writing(output_dir):
        output_dir.mkdir(parents=True, exist_ok=True)
        probe = output_dir / f".probe-{os.getpid()}"
        with open(probe, "wb") as f:
            f.write(b"ok")
            f.flush()
            os.fsync(f.fileno())
        probe.unlink()


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Write via a temporary name and rename, so `path` is either absent or complete."""
    write_atomic(path, lambda tmp: pq.write_table(table, tmp, compression=COMPRESSION))


@contextmanager
def output_lock(output_dir: Path) -> Iterator[None]:
    """One writer per output directory (released by the OS if the process dies)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    with open(output_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RuntimeError(f"another pipeline run is writing to {output_dir}") from exc
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def published_parts(output_dir: Path, dataset: str) -> list[Path]:
    root = output_dir / dataset
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("run_date=*/*.parquet") if not p.name.startswith((".", "_")))


def any_published(output_dir: Path, dataset: str, row_ids: list[str]) -> bool:
    """Whether any of these row_ids is published in the dataset (read one row group of ids at a time: the
    dataset's ids are never held in memory)."""
    wanted = pa.array(row_ids, pa.string())
    return any(pc.any(pc.is_in(batch.column(0), value_set=wanted)).as_py()
               for part in published_parts(output_dir, dataset)
               for batch in row_group_batches(part, _ID_SLICE, ["row_id"]))


def unpublished(output_dir: Path, dataset: str, table: pa.Table) -> pa.Table:
    """The rows of `table` whose row_id is not published in the dataset, checked part by part in Arrow."""
    keep = pa.array([True] * table.num_rows, pa.bool_())
    for part in published_parts(output_dir, dataset):
        if not table.num_rows:
            break
        for batch in row_group_batches(part, _ID_SLICE, ["row_id"]):  # a large log's part: one row group at a time
            keep = pc.and_(keep, pc.invert(pc.is_in(table.column("row_id"), value_set=batch.column(0))))
    return table.filter(keep)


def published_transactions_of(output_dir: Path, accounts: pa.Array, not_from: pa.Array, dates: set[str]
                              ) -> Iterator[pa.Table]:
    """Published transactions of these accounts, part by part, except those of the files `not_from` in the run
    dates `dates` (the rows of an account's windows that this run did not read itself)."""
    if not len(accounts):
        return
    for part in published_parts(output_dir, "transactions"):
        same_dates = part.parent.name.split("=", 1)[1] in dates
        for batch in row_group_batches(part, _ID_SLICE):  # a large log's part: one row group at a time
            t = pa.Table.from_batches([batch])
            keep = pc.is_in(t.column("account"), value_set=accounts)
            if same_dates:
                keep = pc.and_(keep, pc.invert(pc.is_in(t.column("source_file"), value_set=not_from)))
            t = t.filter(keep)
            if t.num_rows:
                yield t


def published_ids(output_dir: Path, datasets: tuple[str, ...]) -> set[str]:
    """row_ids already published in these datasets (the already-done check)."""
    ids: set[str] = set()
    for ds in datasets:
        for part in published_parts(output_dir, ds):
            ids.update(pq.read_table(part, columns=["row_id"]).column("row_id").to_pylist())
    return ids


def read_dataset(output_dir: Path, dataset: str) -> pa.Table:
    """All published rows of a dataset with `run_date` (from the partition) as a column."""
    tables = []
    for part in published_parts(output_dir, dataset):
        t = pq.read_table(part)
        run_date = part.parent.name.split("=", 1)[1]
        tables.append(t.append_column("run_date", pa.array([run_date] * t.num_rows, pa.string())))
    if not tables:
        schema = dataset_schema(dataset)
        return schema.append(pa.field("run_date", pa.string())).empty_table()
    return pa.concat_tables(tables)


class Staging:
    """Work-in-progress parts of one run (see the module docstring for the protocol)."""

    @_output_io
    def __init__(self, output_dir: Path, run_key: str, run_date: str) -> None:
        self.output_dir = output_dir
        self.run_key = run_key
        self.run_date = run_date
        self.root = output_dir / STAGING / run_key
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "done").mkdir(exist_ok=True)

    # ---- writing
    def is_done(self, part: str) -> bool:
        return (self.root / "done" / part).exists()

    @_output_io
    def write_part(self, part: str, tables: dict[str, pa.Table]) -> None:
        """Stage one unit of progress (a bucket, or the ingest outputs) atomically."""
        for ds, table in tables.items():
            if table.num_rows == 0:
                continue
            table = table.select(dataset_schema(ds).names).cast(dataset_schema(ds))
            _write_parquet(table, self.root / "parts" / ds / f"{part}.parquet")
        write_text_atomic(self.root / "done" / part, "")

    @_output_io
    def write_spool_part(self, part: str, spool: Path, file_sha: str, schema_version: str) -> None:
        """Stage a large log's spool file as a transactions part, batch by batch (its rows never all in memory)."""
        schema = dataset_schema("transactions")
        dest = self.root / "parts" / "transactions" / f"{part}.parquet"
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.tmp")
        with pq.ParquetWriter(str(tmp), schema) as writer:
            for batch in row_group_batches(spool, 65_536):
                n = batch.num_rows
                cols = {**{name: batch.column(name) for name in batch.schema.names},
                        "file_sha256": pa.array([file_sha] * n, pa.string()),
                        "schema_version": pa.array([schema_version] * n, pa.string())}
                writer.write_table(pa.Table.from_arrays([cols[f.name] for f in schema], schema=schema))
        os.replace(tmp, dest)
        write_text_atomic(self.root / "done" / part, "")

    @_output_io
    def write_supersede(self, spec: Supersede, keep_ids: pa.Array) -> None:
        """What the publish retires besides replaced row ids (pipeline.output.supersede); part of the commit."""
        spec.write(self.root, keep_ids)

    def staged(self) -> dict[str, list[Path]]:
        return {ds: sorted((self.root / "parts" / ds).glob("*.parquet")) for ds in DATASETS}

    # ---- committing
    @_output_io
    def commit(self, manifest: dict[str, Any], upsert: str = "all_dates") -> Path:
        """Freeze the publish plan; after this the run is recoverable by roll-forward. `upsert`: "all_dates"
        (rows of this run replace their older copies wherever they are) or "own_date" (`--force`: only this
        run_date's partition changes)."""
        plan: dict[str, list[list[str]]] = {}
        ids_path = self.root / "row_ids.parquet"
        tmp = ids_path.with_name(f".{ids_path.name}.tmp")
        # one row group of a part's ids at a time (a large log's part holds millions): named and appended
        with pq.ParquetWriter(str(tmp), pa.schema([pa.field("row_id", pa.string())])) as ids_out:
            for ds, parts in self.staged().items():
                for p in parts:
                    digest = _IdDigest(ds, self.run_key)
                    for batch in row_group_batches(p, _ID_SLICE, ["row_id"]):
                        digest.update(batch.column(0))
                        ids_out.write_table(pa.table({"row_id": batch.column(0)}))
                    name = digest.part_name()
                    dest = self.output_dir / ds / f"run_date={self.run_date}" / name
                    plan.setdefault(ds, []).append([str(p.relative_to(self.root)),
                                                    str(dest.relative_to(self.output_dir))])
        os.replace(tmp, ids_path)
        if upsert not in ("all_dates", "own_date"):
            raise ValueError(f"unknown upsert scope: {upsert}")
        commit = {"run_key": self.run_key, "run_date": self.run_date, "upsert": upsert, "plan": plan,
                  "manifest": manifest}
        path = self.root / COMMIT
        write_text_atomic(path, json.dumps(commit, indent=1, default=str))
        return path

    def discard(self) -> None:
        if self.root.exists():
            _discard_staging(self.root)


def _link_or_copy(src: Path, dst: Path) -> None:
    """A second name for an immutable part (no copy on one filesystem); a copy where hard links are refused."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _renameat2() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one atomic step (Linux renameat2 RENAME_EXCHANGE; Python's os has no binding for
    it). False where the kernel, libc or filesystem cannot, and the caller falls back to two renames."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def _part_name(ds: str, origin: str, row_ids: pa.Array | pa.ChunkedArray) -> str:
    """A part's file name: unique to its rows and where they come from (the run that wrote them, or the part
    they were rewritten from). A name never reappears with other contents, so a reader that listed one
    version of a partition and opens a file after the swap either finds the same bytes or no file."""
    digest = _IdDigest(ds, origin)
    for chunk in row_ids.chunks if isinstance(row_ids, pa.ChunkedArray) else [row_ids]:
        digest.update(chunk)
    return digest.part_name()


class _IdDigest:
    """An order-free digest of a set of row ids, taken slice by slice: the count and two sums (mod 2**64) of
    seeded 64-bit hashes of the ids (polars). Sorting the ids held a large log's millions at once. A name only has
    to be unique, so polars' hash (stable within a version) does; a window's fingerprint is row identity and must
    outlive versions, so it sums the ids' own hex words instead (pipeline.plan.work._Member)."""

    def __init__(self, ds: str, origin: str) -> None:
        self.parts, self.n, self.sums = (ds, origin), 0, [0, 0]

    def update(self, ids: pa.Array) -> None:
        series = pl.Series(ids)
        self.n += len(series)
        for k, seed in enumerate((0x5EED, 0xF00D)):
            h = series.hash(seed=seed).to_frame("h")  # halves summed apart: no sum can overflow
            hi, lo = h.select((pl.col("h") // 2**32).sum(), (pl.col("h") % 2**32).sum().alias("lo")).row(0)
            total = (int(hi or 0) << 32) + int(lo or 0)
            self.sums[k] = (self.sums[k] + total) % 2**64

    def part_name(self) -> str:
        return f"part-{stable_id(*self.parts, self.n, *self.sums)[:20]}.parquet"


_ID_SLICE = 100_000


def _build_partition(live: Path, build: Path, ds: str, new_parts: list[tuple[Path, str]],
                     new_ids: Callable[[], pa.Array], retire: Callable[[pa.Table], pa.Array] | None = None) -> bool:
    """The partition's next version in `build`: live parts without rows this run replaces (same row id among
    `new_ids()`, read only where a live part has to be checked) or retires (`retire`: pipeline.output.supersede),
    plus the new parts. Unchanged parts are hard links, rewritten ones get content-addressed names; both the check
    and the rewrite read a part one row group at a time (a large log's part is not held whole). False if nothing
    would change."""
    live_parts = sorted(p for p in live.glob("*.parquet") if not p.name.startswith((".", "_"))) if live.is_dir() else []

    def dropped(part: pq.ParquetFile, group: int) -> pa.Array:
        """Which rows of the row group this version leaves out."""
        cols = (part.read_row_group(group, columns=columns_for(ds)) if retire is not None
                else part.read_row_group(group, columns=["row_id"]))
        replaced = pc.is_in(cols.column("row_id"), value_set=new_ids())
        return pc.or_(replaced, retire(cols)) if retire is not None else replaced

    rewrite: set[Path] = set()
    for path in live_parts:
        part = pq.ParquetFile(path, read_dictionary=dictionary_columns(ds) if retire is not None else None)
        if any(pc.any(dropped(part, g)).as_py() for g in range(part.num_row_groups)):
            rewrite.add(path)
    if not new_parts and not rewrite:
        return False
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    for path in live_parts:
        if path in rewrite:
            _rewrite_without(path, build, ds, dropped)
        else:
            _link_or_copy(path, build / path.name)
    for src, name in new_parts:  # written last: a new part supersedes a rewritten one of the same rows
        dest = build / name
        if dest.exists():
            dest.unlink()
        _link_or_copy(src, dest)
    _fsync_dir(build)
    return True


def _rewrite_without(path: Path, build: Path, ds: str, dropped: Callable[[pq.ParquetFile, int], pa.Array]) -> None:
    """`path` without the rows `dropped` marks, written into `build` one row group at a time under the name of
    the rows it keeps (none kept: no file)."""
    checked = pq.ParquetFile(path, read_dictionary=dictionary_columns(ds))
    whole = pq.ParquetFile(path)
    digest, tmp, writer = _IdDigest(ds, path.name), build / f".{path.name}.rewrite-{os.getpid()}", None
    try:
        for g in range(whole.num_row_groups):
            kept = whole.read_row_group(g).filter(pc.invert(dropped(checked, g)))
            if not kept.num_rows:
                continue
            if writer is None:
                writer = pq.ParquetWriter(tmp, kept.schema, compression=COMPRESSION)
            writer.write_table(kept)
            digest.update(kept.column("row_id").combine_chunks())
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, build / digest.part_name())


def _swap_in(live: Path, build: Path, spare: Path) -> None:
    """Make `build` the live partition in one rename; the previous version ends at `build` (exchange) or `spare`."""
    live.parent.mkdir(parents=True, exist_ok=True)
    if not live.exists():
        os.rename(build, live)
    elif not _exchange(build, live):
        os.rename(live, spare)  # readers briefly see no partition, never a half-updated one
        os.rename(build, live)
    _fsync_dir(live.parent)


def _publish_partition(work: Path, live: Path, ds: str, new_parts: list[tuple[Path, str]],
                       new_ids: Callable[[], pa.Array], retire: Callable[[pa.Table], pa.Array] | None = None) -> None:
    """Publish one dataset partition's next version atomically. Idempotent: the built version's inode, recorded
    before the swap, tells a roll-forward whether the swap already happened."""
    build, spare, record = work / "next", work / "previous", work / "inode"
    if record.exists():
        inode = int(record.read_text())
        if not (live.exists() and live.stat().st_ino == inode):
            if not build.exists():
                raise RuntimeError(f"cannot finish publishing {live}: its built version is missing")
            _swap_in(live, build, spare)
    else:
        work.mkdir(parents=True, exist_ok=True)
        if not _build_partition(live, build, ds, new_parts, new_ids, retire):
            return
        write_text_atomic(record, str(build.stat().st_ino))
        _swap_in(live, build, spare)
    shutil.rmtree(build, ignore_errors=True)
    shutil.rmtree(spare, ignore_errors=True)


def _discard_staging(staging_root: Path) -> None:
    """Remove a finished staging directory: first renamed out of the recovery scan (one atomic step, so a crash
    mid-removal never leaves a half-deleted commit that looks unfinished), then deleted."""
    trash = staging_root.parent / f"{TRASH}{staging_root.name}"
    shutil.rmtree(trash, ignore_errors=True)
    os.rename(staging_root, trash)
    shutil.rmtree(trash, ignore_errors=True)


@_output_io
def publish_committed(staging_root: Path, output_dir: Path) -> dict[str, Any]:
    """Roll a committed staging directory forward. Each dataset partition it changes is replaced in one atomic
    swap; the manifest comes last. The upsert (rows of this run replace published rows with the same row_id) spans
    all run dates, so a retried unit never appears twice, except for `--force`, which touches only its own date's
    partition. Idempotent: safe to repeat after a crash at any point."""
    commit = json.loads((staging_root / COMMIT).read_text())
    run_date = commit["run_date"]
    # this run's row ids, read once and only if a live partition has parts to check (a first run into an empty
    # output never holds a large log's millions of ids)
    new_ids = functools.cache(lambda: pq.read_table(staging_root / "row_ids.parquet").column("row_id").combine_chunks())
    supersede = Supersede.read(staging_root)
    for ds in DATASETS:
        target = output_dir / ds / f"run_date={run_date}"
        partitions = {target}
        if commit.get("upsert", "all_dates") == "all_dates":
            partitions |= {p.parent for p in published_parts(output_dir, ds)}
        for live in sorted(partitions):
            parts = [(staging_root / src, Path(dest).name) for src, dest in commit["plan"].get(ds, [])] \
                if live == target else []
            retire = retire_rule(ds, live.name.split("=", 1)[1], *supersede) if supersede is not None else None
            _publish_partition(staging_root / "publish" / ds / live.name, live, ds, parts, new_ids, retire)
    manifest_path = output_dir / MANIFESTS / f"run_date={run_date}" / f"manifest-{commit['run_key']}.json"
    write_text_atomic(manifest_path, json.dumps(commit["manifest"], indent=1, default=str))
    _discard_staging(staging_root)
    return commit["manifest"]


def _staging_dirs(output_dir: Path) -> list[Path]:
    """Staging directories of runs (not the trash of finished ones, which is removed here)."""
    root = output_dir / STAGING
    if not root.is_dir():
        return []
    dirs = []
    for st in sorted(root.iterdir()):
        if st.name.startswith(TRASH):
            shutil.rmtree(st, ignore_errors=True)
        elif st.is_dir():
            dirs.append(st)
    return dirs


@_output_io
def roll_forward(output_dir: Path) -> list[str]:
    """Finish publishing every committed-but-unpublished run (after a crash). Returns their keys."""
    rolled = []
    for st in _staging_dirs(output_dir):
        if (st / COMMIT).exists():
            publish_committed(st, output_dir)
            rolled.append(st.name)
    return rolled


@_output_io
def drop_stale(output_dir: Path, keep: str) -> list[str]:
    """Remove uncommitted staging of other run keys (inputs, model or prompt changed since)."""
    dropped = []
    for st in _staging_dirs(output_dir):
        if st.name != keep and not (st / COMMIT).exists():
            shutil.rmtree(st, ignore_errors=True)
            dropped.append(st.name)
    return dropped
