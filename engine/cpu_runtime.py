"""Process-level CPU runtime settings the engine depends on for speed: OpenMP waiting and the C allocator.

Threads. An engine step is hundreds of short parallel regions, so how OpenMP threads wait between them matters.
Unbounded spinning stalls every region whenever another process holds a core; fully passive waiting pays a futex
sleep and wake-up per region. A bounded spin (GOMP_SPINCOUNT=20000) before sleeping beat both on the idle and the
busy dev box (figures: docs/bench/design-choices.md). Set OMP_WAIT_POLICY or GOMP_SPINCOUNT yourself to override it.

Allocator. Every engine step allocates and frees many MB-sized tensors (KV gathers, activations, int8 GEMM
intermediates). glibc serves those with fresh mmap()s and hands them back to the kernel on free, so every step
page-faults its working set in again. So a CPU engine raises glibc's mmap threshold to its maximum and stops
trimming the heap (fewer faults, less wall time: docs/bench/design-choices.md), unless the process already chose
(MALLOC_* variables, or a preloaded jemalloc/tcmalloc). Memory an engine freed is therefore kept by the process
until `return_freed_memory()` hands it back (a program that goes on after its engine, e.g. to write results).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import os
import sys

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_MAX_MMAP_THRESHOLD = 32 << 20  # glibc's ceiling for M_MMAP_THRESHOLD on 64-bit
_NO_TRIM = (1 << 31) - 1  # mallopt takes a C int


# Spin iterations before a waiting OpenMP thread sleeps (GNU libgomp; libgomp's own default is 300000).
OMP_SPIN_COUNT = "20000"


def configure_cpu_threads(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> None:
    """Set the OpenMP waiting default (see the module docstring) unless the operator chose one. Only effective
    before torch (and its OpenMP runtime) is imported."""
    if "torch" in sys.modules or "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ:
        return
    environ["GOMP_SPINCOUNT"] = OMP_SPIN_COUNT


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    """The C library's handle, looked up once: `ctypes.util.find_library` runs `ldconfig -p` in a child process,
    so a run that hands memory back after every bucket would fork its whole resident size again each time."""
    path = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(path) if path else None
    except OSError:
        return None


def keep_freed_memory() -> bool:
    """Tune glibc malloc for the engine's allocate/free pattern; True when applied. Idempotent, process-wide."""
    if not sys.platform.startswith("linux"):
        return False
    if any(k.startswith("MALLOC_") for k in os.environ) or any(
        name in os.environ.get("LD_PRELOAD", "") for name in ("jemalloc", "tcmalloc", "mimalloc")
    ):
        return False  # the operator configured the allocator
    if (libc := _libc()) is None:
        return False
    try:
        mallopt = libc.mallopt
    except AttributeError:
        return False  # not glibc (musl has no mallopt)
    ok = bool(mallopt(_M_MMAP_THRESHOLD, _MAX_MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _NO_TRIM))
    if not ok:
        log.debug("mallopt refused the engine's allocator settings; keeping the defaults")
    return ok


def return_freed_memory(collect: bool = True) -> bool:
    """Collect unreachable objects (`collect`: an engine's objects hold reference cycles), then hand the C heap's
    free memory back to the kernel (glibc malloc_trim): for a process that drops its engine and goes on, since the
    engine's allocator setting keeps freed memory. True when trimmed; a no-op where the C library is not glibc."""
    if collect:
        gc.collect()
    if not sys.platform.startswith("linux") or (libc := _libc()) is None:
        return False
    try:
        malloc_trim = libc.malloc_trim
    except AttributeError:
        return False  # not glibc
    malloc_trim.argtypes = [ctypes.c_size_t]
    return bool(malloc_trim(0))
