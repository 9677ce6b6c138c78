"""Opens a GGUF file and turns its key/value metadata into plain Python values."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"


def is_gguf(path: Path) -> bool:
    """A file that starts with the GGUF magic (the suffix alone is not trusted)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


@dataclass(frozen=True)
class GGUFTensor:
    """What the loader needs of one tensor. Not the `gguf` reader's ReaderTensor: its field records keep the
    reader's parsed key/value arrays alive (50 MiB on a 49k-token vocabulary) for as long as the file is cached."""

    tensor_type: Any  # gguf.GGMLQuantizationType
    shape: tuple[int, ...]  # as GGUF lists it: ne0 (columns) first
    data: Any  # numpy view of the memory-mapped file


@dataclass
class GGUFFile:
    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensor]

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_key(self, key: str, default: Any = None) -> Any:
        """`<architecture>.<key>`, the way llama.cpp namespaces model hyperparameters."""
        return self.metadata.get(f"{self.architecture}.{key}", default)

    def release_pages(self) -> None:
        """Drop the file's mapped pages from this process's resident set once the weights are built from them:
        the kernel keeps them in its page cache, and a later read maps them in again. Without this, the cached
        parse keeps a quantized file's every page resident for the life of the process."""
        maps = {id(m): m for t in self.tensors.values() if (m := _mapping(t.data)) is not None}
        for m in maps.values():
            try:
                m.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError, AttributeError):  # a closed map, or a platform without madvise
                pass

    def require(self, key: str) -> Any:
        full = f"{self.architecture}.{key}"
        if full not in self.metadata:
            raise ModelLoadError(f"{self.path}: GGUF metadata lacks {full!r}")
        return self.metadata[full]


def _mapping(array: Any) -> mmap.mmap | None:
    """The mmap under a numpy view of a memory-mapped file (np.memmap keeps it as `_mmap`), or None."""
    while array is not None:
        if isinstance(m := getattr(array, "_mmap", None), mmap.mmap):
            return m
        array = getattr(array, "base", None)
    return None


def _value(field: Any) -> Any:
    from gguf import GGUFValueType  # noqa: PLC0415 - optional until a GGUF file is opened

    value = field.contents()
    if field.types and field.types[0] == GGUFValueType.ARRAY and not isinstance(value, list):
        value = list(value)
    return value


def read_gguf(path: str | Path) -> GGUFFile:
    """Parsed once per file version and process: the `gguf` reader takes seconds on a real vocabulary, and a run
    reads the tokenizer (for its prompt version) before it loads the model."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"GGUF file {str(path)!r} does not exist")
    st = path.stat()
    return _read_gguf(str(path.resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=2)
def _read_gguf(resolved: str, _size: int, _mtime_ns: int) -> GGUFFile:
    path = Path(resolved)
    try:
        import gguf  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ModelLoadError("reading GGUF files needs the `gguf` package (pip install gguf)") from exc
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # the reader raises ValueError/IndexError/struct errors on damaged files
        raise ModelLoadError(f"{path}: not a readable GGUF file ({type(exc).__name__}: {exc})") from exc
    metadata = {name: _value(field) for name, field in reader.fields.items() if not name.startswith("GGUF.")}
    tensors = {t.name: GGUFTensor(t.tensor_type, tuple(int(d) for d in t.shape), t.data) for t in reader.tensors}
    return GGUFFile(path=path, metadata=metadata, tensors=tensors)
