"""Builds and loads the C++ CPU kernels once per machine and kernel version.

A build is keyed by everything that decides its binary (the sources and headers, the compiler flags, the torch
and Python versions, the compiler named in CXX, this CPU's feature flags), so two checkouts or two torch versions
on one machine never load or rebuild each other's module. It is built aside in a private folder and renamed into
place when done; builders take turns through an `flock`, which the kernel releases when its holder dies, so a
build killed mid-way leaves nothing a later run waits on (torch's own lock file, left behind by a kill, made every
later run wait forever). A built module is imported directly, without torch's lock. A run that has waited
`WAIT_S` for another process's build runs on the torch kernels and says so.

`python -m kernels.cpu` builds ahead of time (scripts/setup.sh does), so runs and tests do not wait.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import logging
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import IO

log = logging.getLogger(__name__)

_SOURCES = [Path(__file__).with_name(n) for n in ("bindings.cpp", "paged_decode.cpp", "int8_rows.cpp", "fused_ops.cpp",
                                                "kv_store.cpp", "int8_gemm.cpp", "int8_gemm_avx2.cpp")]
_HEADERS = [Path(__file__).with_name(n) for n in ("simd.h", "int8_quant.h", "int8_gemm_api.h", "paged_decode_avx2.h",
                                                   "torch_row_sum.h", "fused_ops_avx2.h")]
DISABLE_ENV = "FINLLM_NATIVE_KERNELS"  # "0": never build or load; use the torch reference kernels
CACHE_ENV = "FINLLM_KERNEL_CACHE"  # where built kernels live (default: $XDG_CACHE_HOME/finllm/kernels)
WAIT_S = 1200.0  # how long a run waits for another process's build before it runs on the torch kernels


def _flags() -> list[str]:
    # -march=native: built on the machine that runs it, for its vector width (AVX-512 where present).
    # -fopenmp: at::parallel_for and the kernel's own `omp for` are inline and need it.
    # -ffp-contract=off: no implicit multiply-add fusion, so the int8 passes round exactly like the torch reference
    # (the kernels write their fused multiply-adds explicitly where they want them).
    return ["-O3", "-std=c++17", "-march=native", "-fopenmp", "-ffp-contract=off"]


def _cpu_flags() -> str:
    flags = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return flags + line
    except OSError:
        pass
    return flags


def kernel_key(sources: list[bytes], flags: list[str], torch_version: str, python: str, cxx: str, cpu: str) -> str:
    """A short hash of everything that decides the built binary."""
    h = hashlib.sha256()
    for part in (*sources, *(f.encode() for f in flags), torch_version.encode(), python.encode(), cxx.encode(),
                 cpu.encode()):
        h.update(len(part).to_bytes(8, "little") + part)
    return h.hexdigest()[:16]


def _module_name() -> str:
    import torch  # noqa: PLC0415 - heavy import, only when needed

    key = kernel_key([p.read_bytes() for p in _SOURCES + _HEADERS], _flags(), torch.__version__,
                     platform.python_version(), os.environ.get("CXX", "c++"), _cpu_flags())
    return f"finllm_cpu_kernels_{key}"


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "finllm" / "kernels"


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _take_turn(lock: IO[str], wait_s: float) -> bool:
    """Hold the build lock, waiting up to `wait_s` for a live builder; False when the wait ran out."""
    deadline, told = time.monotonic() + wait_s, False
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            if not told:
                print("waiting for another process that is building the native CPU kernels...", file=sys.stderr,
                      flush=True)
                told = True
            time.sleep(0.5)


def load_or_build(root: Path, name: str, compile_into: Callable[[Path], ModuleType],
                  wait_s: float = WAIT_S) -> ModuleType | None:
    """The module `name` from `root/name/name.so`, built first by `compile_into(private_dir)` if it is not there;
    None when another process's build outlasted `wait_s`."""
    built = root / name / f"{name}.so"
    if built.exists():
        return _import(name, built)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "a") as lock:
        if not _take_turn(lock, wait_s):
            log.warning("another process has been building the native CPU kernels for %.0f s; this run uses the "
                        "torch reference kernels", wait_s)
            return None
        try:
            if built.exists():  # the process we waited for built it
                return _import(name, built)
            for abandoned in root.glob(f"{name}.build-*"):  # a builder that died (we hold its lock now)
                shutil.rmtree(abandoned, ignore_errors=True)
            aside = root / f"{name}.build-{os.getpid()}"
            aside.mkdir()
            print("building the native CPU kernels (once per machine and kernel version; a few minutes on 2 cores)...",
                  file=sys.stderr, flush=True)
            module = compile_into(aside)
            os.rename(aside, root / name)  # atomic: a later run sees the whole build or none
            return module
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _torch_compile(name: str) -> Callable[[Path], ModuleType]:
    def compile_into(build_dir: Path) -> ModuleType:
        from torch.utils.cpp_extension import load  # noqa: PLC0415 - heavy import, only when needed

        _ensure_ninja_on_path()
        return load(name=name, sources=[str(s) for s in _SOURCES], extra_cflags=_flags(), extra_ldflags=["-fopenmp"],
                    build_directory=str(build_dir), verbose=False)

    return compile_into


@functools.cache
def native_ops() -> ModuleType | None:
    """The compiled module, or None when disabled (FINLLM_NATIVE_KERNELS=0), when the build fails, or when another
    process's build outlasts `WAIT_S`."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return None
    try:
        name = _module_name()
        return load_or_build(cache_root(), name, _torch_compile(name))
    except Exception as exc:  # no compiler, no ninja, a read-only cache dir: run on the torch kernels
        log.warning("native CPU kernels unavailable, using the torch reference kernels: %s", exc)
        return None


def _ensure_ninja_on_path() -> None:
    """torch looks for `ninja` on PATH; the pip-installed one sits in the venv's bin, which is not on PATH when the
    venv's python is called directly (as the README's commands do)."""
    if shutil.which("ninja"):
        return
    try:
        import ninja  # noqa: PLC0415

        bin_dir = ninja.BIN_DIR
    except (ImportError, AttributeError):
        bin_dir = os.path.dirname(sys.executable)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
