"""Which published rows a run's publish retires besides those it replaces by row id: the identity of a row across
runs is (file, record), and the latest version of a file wins.

A run that read a file's current version retires every published row of that file, in any dataset and in every
run date partition of runs over the same input folder, that the run does not hold itself (stage now or find already published): a grown log's older rows, a
replaced document's row, the error row of an attempt that failed. Transactions carry the hash of the version they
came from, so theirs are told apart without listing ids. A file whose read failed as a whole this run (timed out,
changed while read, too large) keeps its published rows, the last version that was read; only its older error rows
give way to this run's. An account-month window is one row: the run's window for that key retires any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SPEC = "supersede.json"
KEEP_IDS = "keep_ids.parquet"
# Outcomes that say nothing about a file's content: its rows from the last version read stay published.
WHOLE_FILE_FAILURES = frozenset({"FileChanged", "FileTimeout", "ParserCrashed", "MemoryLimit", "UnreadableFile",
                                 "FileTooLarge", "InternalError"})


@dataclass(frozen=True)
class Supersede:
    files: dict[str, str] = field(default_factory=dict)  # source_file -> sha of the version this run read
    failed_files: tuple[str, ...] = ()  # read as a whole failed this run
    window_keys: tuple[tuple[str, str], ...] = ()  # (account, period_start) of the windows this run computed
    probes: dict[str, tuple[int, str]] = field(default_factory=dict)  # log -> (a source_row, its row id now)
    # the run dates whose runs read this run's input folder: only there does a file path name the same file
    dates: tuple[str, ...] = ()

    def write(self, root: Path, keep_ids: pa.Array) -> None:
        pq.write_table(pa.table({"row_id": keep_ids.cast(pa.string())}), root / KEEP_IDS)
        (root / SPEC).write_text(json.dumps(asdict(self)))

    @staticmethod
    def read(root: Path) -> tuple[Supersede, pa.Array] | None:
        if not (root / SPEC).exists():
            return None
        raw = json.loads((root / SPEC).read_text())
        spec = Supersede(raw["files"], tuple(raw["failed_files"]), tuple(tuple(k) for k in raw["window_keys"]),
                         {f: (int(r), str(i)) for f, (r, i) in raw["probes"].items()}, tuple(raw["dates"]))
        return spec, pq.read_table(root / KEEP_IDS).column("row_id").combine_chunks()


def read_versions(files: pa.Table, errors: pa.Table) -> Supersede:
    """The files whose current version this run read (from ingest's files and error tables), and those whose
    read failed as a whole."""
    failed = {e["source_file"] for e in errors.select(["source_file", "error_class", "unit"]).to_pylist()
              if e["error_class"] in WHOLE_FILE_FAILURES and e["unit"] in ("file", "document")}
    read = {f["source_file"]: f["sha256"] for f in files.select(["source_file", "sha256", "status"]).to_pylist()
            if f["status"] not in ("duplicate", "skipped") and f["source_file"] not in failed}
    return Supersede(read, tuple(sorted(failed)))


def columns_for(ds: str) -> list[str]:
    """The columns `retire_rule`'s function reads from a published part of `ds`."""
    return {"account_windows": ["row_id", "account", "period_start"],
            "transactions": ["row_id", "source_file", "file_sha256", "source_row"],
            "filing_sections": ["row_id", "source_file", "filing_row_id"]}.get(ds, ["row_id", "source_file"])


def dictionary_columns(ds: str) -> list[str]:
    """Columns `retire_rule` reads dictionary-encoded: a large log's part repeats one file name and one hash
    millions of times, and its check then costs two integer arrays, not two string columns."""
    return ["source_file", "file_sha256"] if ds == "transactions" else []


def _codes(column: pa.Array) -> pa.DictionaryArray:
    return column if pa.types.is_dictionary(column.type) else column.dictionary_encode()


def _other_version(t: pa.Table, current: dict[str, str], stale: set[str]) -> pa.ChunkedArray:
    """Rows of a re-read file (`current`: file -> its hash now) from another version of it, or from this version
    read by an older parser (`stale`: such files)."""
    masks = []
    for batch in t.to_batches():
        files, versions = _codes(batch.column("source_file")), _codes(batch.column("file_sha256"))
        code = {v: i for i, v in enumerate(versions.dictionary.to_pylist())}
        # per file name: the code of the version to keep (-1: none), -2: not re-read (keep every row)
        wanted = np.array([-2 if f not in current else -1 if f in stale else code.get(current[f], -1)
                           for f in files.dictionary.to_pylist()], dtype=np.int64)
        expected = wanted[files.indices.to_numpy(zero_copy_only=False)]
        masks.append(pa.array((expected != -2) & (expected != versions.indices.to_numpy(zero_copy_only=False))))
    return pa.chunked_array(masks, pa.bool_())


def _read_by_older_parser(t: pa.Table, current: dict[str, str], probes: dict[str, tuple[int, str]]) -> set[str]:
    """Re-read files whose published rows of the current version carry other row ids than this run's (the
    reader's version is part of a transaction's id): one probe row per file tells, all its rows are read
    together."""
    if not probes:
        return set()
    rows = pa.array(sorted({r for r, _ in probes.values()}), pa.int64())
    hits = t.filter(pc.is_in(t.column("source_row"), value_set=rows)).select(
        ["source_file", "file_sha256", "source_row", "row_id"]).to_pylist()
    return {h["source_file"] for h in hits
            if h["source_file"] in probes and probes[h["source_file"]][0] == h["source_row"]
            and current.get(h["source_file"]) == h["file_sha256"] and probes[h["source_file"]][1] != h["row_id"]}


def _in(values: pa.Array | pa.ChunkedArray, keys: pa.Array) -> pa.Array:
    return pc.is_in(values, value_set=keys)


def _keyed(a: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pc.binary_join_element_wise(a, pc.cast(b, pa.string()), "\x1f")


def retire_rule(ds: str, run_date: str, spec: Supersede, keep_ids: pa.Array) -> Callable[[pa.Table], pa.Array] | None:
    """A function (a part's `columns_for(ds)`) -> mask of the rows this run retires in the `run_date` partition, or
    None for none. A file's rows are retired only in partitions of runs that read the same input folder (a
    backfill's folder per date holds other files under the same names).

    Transactions: rows of a re-read file from another version of it or an older reader (its rows now are this
    run's, staged or already published). Documents, filing facts and errors: rows of a re-read file that this run
    does not hold (a document's row under an older model, an error that no longer happens); filing sections: those
    of a filing row this run does not hold. Windows: another row for an account-month this run computed."""
    if ds == "account_windows":
        if not spec.window_keys:
            return None
        keys = pa.array([f"{a}\x1f{p}" for a, p in spec.window_keys], pa.string())
        return lambda t: pc.and_(_in(_keyed(t.column("account"), t.column("period_start")), keys),
                                 pc.invert(_in(t.column("row_id"), keep_ids)))
    names = {*spec.files, *spec.failed_files} if ds == "errors" else set(spec.files)
    if run_date not in spec.dates or not names or ds not in ("transactions", "documents", "filing_facts", "filing_sections", "errors"):
        return None
    files = pa.array(sorted(names), pa.string())
    if ds == "transactions":
        return lambda t: _other_version(t, spec.files, _read_by_older_parser(t, spec.files, spec.probes))
    held = "filing_row_id" if ds == "filing_sections" else "row_id"
    return lambda t: pc.and_(_in(t.column("source_file"), files), pc.invert(_in(t.column(held), keep_ids)))
