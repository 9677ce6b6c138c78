"""Published parts written by an older schema version: found from their Parquet footers, refused by a run (a run
publishing beside them would leave a dataset that polars cannot scan and DuckDB reads with widened types), and
rewritten to the current schema by `pipeline migrate`, one atomic partition swap at a time.

What migrating may do to a part: add a column the older version did not record (as nulls: unknown, never a guessed
default), cast a column whose type changed (a float amount to its decimal, read through its shortest decimal text
so that 29232.37 stays 29232.37), and reorder columns. A column the current schema no longer has is never dropped:
its partition is reported and left as it is. Rows keep the `schema_version` they were written under: it says which
version's rules produced their values.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.output.datasets import DATASETS, dataset_schema
from pipeline.output.sink import (
    STAGING,
    OutputError,
    _fsync_dir,
    _link_or_copy,
    _output_io,
    _part_name,
    _swap_in,
    _write_parquet,
    published_parts,
)
from schemas import SCHEMA_VERSION


class SchemaDriftError(OutputError):
    """The output holds parts of an older schema version; the run publishes nothing until they are migrated."""


@dataclass
class Drift:
    """One dataset's parts whose schema differs from the current one."""

    dataset: str
    parts: list[Path] = field(default_factory=list)
    versions: set[str] = field(default_factory=set)  # the schema_version values their rows carry
    differences: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # why some cannot be migrated


def _comparable(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


def schema_differences(have: pa.Schema, want: pa.Schema) -> list[str]:
    """What differs between a part's columns and the current ones, in words ("missing ocred_pages", "amount:
    double, now decimal128(18, 2)"); nullability and metadata do not count."""
    if _comparable(have) == _comparable(want):
        return []
    got = {f.name: f.type for f in have}
    wanted = {f.name: f.type for f in want}
    out = [f"missing {name}" for name in wanted if name not in got]
    out += [f"{name}: {got[name]}, now {t}" for name, t in wanted.items() if name in got and got[name] != t]
    out += [f"column {name} is no longer written" for name in got if name not in wanted]
    return out or ["columns in another order"]


def _version_counts(part: Path) -> dict[str, int]:
    if "schema_version" not in pq.read_schema(part).names:
        return {"(none)": pq.ParquetFile(part).metadata.num_rows}
    counts = pc.value_counts(pq.read_table(part, columns=["schema_version"]).column("schema_version"))
    return {str(c["values"]): c["counts"] for c in counts.to_pylist()}


def row_schema_versions(output_dir: Path, dataset: str) -> dict[str, int]:
    """How many published rows of the dataset each schema version wrote."""
    total: dict[str, int] = {}
    for part in published_parts(output_dir, dataset):
        for v, n in _version_counts(part).items():
            total[v] = total.get(v, 0) + n
    return total


def find_drift(output_dir: Path) -> list[Drift]:
    """Every dataset with parts whose schema is not the current one (footers only, plus their version column)."""
    found = []
    for ds in DATASETS:
        want = dataset_schema(ds)
        drift = Drift(ds)
        for part in published_parts(output_dir, ds):
            diff = schema_differences(pq.read_schema(part), want)
            if not diff:
                continue
            drift.parts.append(part)
            drift.versions |= set(_version_counts(part))
            drift.differences += [d for d in diff if d not in drift.differences]
        if drift.parts:
            found.append(drift)
    return found


def part_count(d: Drift) -> str:
    return f"{len(d.parts)} part{'' if len(d.parts) == 1 else 's'}"


def check_published_schema(output_dir: Path) -> None:
    """Raise SchemaDriftError (one line naming the datasets, versions and `pipeline migrate`) where published parts
    are of another schema."""
    drift = find_drift(output_dir)
    if not drift:
        return
    what = "; ".join(f"{d.dataset}: {part_count(d)} of schema {', '.join(sorted(d.versions))} "
                     f"({', '.join(d.differences[:3])}{', ...' if len(d.differences) > 3 else ''})" for d in drift)
    raise SchemaDriftError(f"{output_dir} holds output of an older schema than this version writes "
                           f"({SCHEMA_VERSION}): {what}. Run `pipeline migrate --output {output_dir}` to rewrite "
                           "them, or write to another output folder")


def _cast(column: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    if pa.types.is_floating(column.type) and pa.types.is_decimal(to):
        # through the float's shortest text: a float cast keeps binary noise (29232.369999...)
        values = [None if v is None else Decimal(repr(v)) for v in column.to_pylist()]
        return pa.chunked_array([pa.array(values, to)], to)
    return column.cast(to)


def conform(table: pa.Table, want: pa.Schema) -> pa.Table:
    """`table` in the current schema; ValueError says why it cannot be (see the module docstring)."""
    extra = [n for n in table.column_names if n not in want.names]
    if extra:
        raise ValueError(f"columns {extra} are not in schema {SCHEMA_VERSION}: migrating would drop them")
    columns, fields = [], []
    for f in want:
        if f.name in table.column_names:
            try:
                columns.append(_cast(table.column(f.name), f.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArithmeticError) as exc:
                raise ValueError(f"column {f.name} cannot become {f.type}: {exc}") from exc
            fields.append(f)
        else:  # not recorded by the version that wrote these rows: unknown, never a made-up default
            columns.append(pa.nulls(table.num_rows, f.type))
            fields.append(f.with_nullable(True))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _migrate_partition(live: Path, ds: str, work: Path) -> None:
    want = dataset_schema(ds)
    build, spare = work / "next", work / "previous"
    shutil.rmtree(work, ignore_errors=True)
    build.mkdir(parents=True)
    for part in sorted(p for p in live.glob("*.parquet") if not p.name.startswith((".", "_"))):
        if not schema_differences(pq.read_schema(part), want):
            _link_or_copy(part, build / part.name)
            continue
        table = conform(pq.read_table(part), want)
        _write_parquet(table, build / _part_name(ds, f"{part.name}@{SCHEMA_VERSION}", table.column("row_id")))
    _fsync_dir(build)
    _swap_in(live, build, spare)
    shutil.rmtree(work, ignore_errors=True)


@_output_io
def migrate(output_dir: Path, dry_run: bool = False) -> list[Drift]:
    """Rewrite every drifted partition to the current schema (each partition swapped in atomically, so a reader
    sees all old or all new parts; a crash leaves each partition whole and a repeat finishes the rest). A partition
    with a part that cannot be migrated is left as it is and listed in `Drift.blocked`. Call under the output
    lock."""
    drift = find_drift(output_dir)
    if dry_run:
        return drift
    for d in drift:
        for live in sorted({p.parent for p in d.parts}):
            work = output_dir / STAGING / f"migrate-{SCHEMA_VERSION}" / d.dataset / live.name
            try:
                _migrate_partition(live, d.dataset, work)
            except ValueError as exc:  # this partition stays as it was
                shutil.rmtree(work, ignore_errors=True)
                d.blocked.append(f"{live.relative_to(output_dir)}: {exc}")
    return drift
