"""Cache keys for the Prefect tasks: built from paths and content hashes, never from large objects.

Prefect's default cache policy hashes a task's inputs; for Arrow tables, prepared buckets or a
loaded engine that is slow or impossible, so every task here either has an explicit key function
from this module or `NO_CACHE`.

    ingest key = input dir + each input file's relative path and SHA-256 + ingest options
                 + a fingerprint of the pipeline/schema sources (a code change invalidates it)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.identity import file_sha256, stable_id


def _package_dirs() -> Iterable[Path]:
    # lazy: read at call time: the versions the running code has
    import pipeline
    import schemas

    for mod in (pipeline, schemas):
        yield Path(mod.__file__).resolve().parent


def code_fingerprint() -> str:
    """Hash of every pipeline/ and schemas/ source file (path and bytes)."""
    h = hashlib.sha256()
    for root in _package_dirs():
        for src in sorted(root.rglob("*.py")):
            h.update(src.relative_to(root.parent).as_posix().encode())
            h.update(src.read_bytes())
    return h.hexdigest()[:16]


def input_fingerprint(input_dir: Path, exclude: tuple[Path, ...] = (), limit: int | None = None,
                      exclude_globs: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(relative path, SHA-256) of exactly the files ingest will read, in its order, then the paths it skips
    (they are not read, but each becomes an error row, so they are part of what ingest returns)."""
    # lazy: read at call time: the versions the running code has
    from pipeline.ingest.discover import discover

    root = input_dir.resolve()
    paths, skipped = discover(root, exclude, exclude_globs)
    if limit is not None:
        paths = paths[:limit]
    return ([(p.relative_to(root).as_posix(), file_sha256(p)) for p in paths]
            + [(p.relative_to(root).as_posix(), "skipped") for p in skipped])


def _limits_key(limits: Any) -> Any:
    return limits.model_dump() if hasattr(limits, "model_dump") else limits


def _profiles_key(profiles: Any) -> list[Any] | None:
    """Bank profiles by content (a changed profile reads files differently)."""
    return None if profiles is None else [p.model_dump() if hasattr(p, "model_dump") else p for p in profiles]


def ingest_cache_key(_ctx: Any, params: dict[str, Any]) -> str | None:
    """Prefect `cache_key_fn` for the ingest task (None, i.e. no caching, if the folder is missing)."""
    input_dir = Path(params["input_dir"])
    if not input_dir.is_dir():
        return None
    given = tuple(params.get("exclude") or ())  # folders as Paths, globs as strings (pipeline.ingest.ingest)
    exclude = tuple(p for p in given if isinstance(p, Path))
    limit = params.get("limit")
    globs = tuple(g for g in given if isinstance(g, str)) + tuple(params.get("exclude_globs") or ())
    files = input_fingerprint(input_dir, exclude, limit, globs)
    return "ingest-" + stable_id(str(input_dir), str(input_dir.resolve()), limit, params.get("default_currency"),
                                 code_fingerprint(), files, globs, _limits_key(params.get("limits")),
                                 _profiles_key(params.get("bank_profiles")))
