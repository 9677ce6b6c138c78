"""Builds and loads the C++ CPU kernels once per process (torch caches the compiled module on disk).

`python -m kernels.cpu` builds ahead of time (scripts/setup.sh does), so runs and tests do not wait.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
import sys
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

_SOURCES = [Path(__file__).with_name(n) for n in ("bindings.cpp", "paged_decode.cpp", "int8_rows.cpp", "fused_ops.cpp",
                                                "kv_store.cpp", "int8_gemm.cpp", "int8_gemm_avx2.cpp")]
_HEADERS = [Path(__file__).with_name(n) for n in ("simd.h", "int8_quant.h", "int8_gemm_api.h", "paged_decode_avx2.h",
                                                   "torch_row_sum.h", "fused_ops_avx2.h")]
# Bump when the build flags change (torch rebuilds by itself when a source changes).
_VERSION = 1
DISABLE_ENV = "FINLLM_NATIVE_KERNELS"  # "0": never build or load; use the torch reference kernels


def _flags() -> list[str]:
    # -march=native: built on the machine that runs it, for its vector width (AVX-512 where present).
    # -fopenmp: at::parallel_for and the kernel's own `omp for` are inline and need it.
    # -ffp-contract=off: no implicit multiply-add fusion, so the int8 passes round exactly like the torch reference
    # (the kernels write their fused multiply-adds explicitly where they want them).
    # The headers' hash as a define: torch rebuilds when a source or a flag changes, not when only a header does.
    headers = hashlib.sha1(b"".join(h.read_bytes() for h in _HEADERS)).hexdigest()[:12]
    return ["-O3", "-std=c++17", "-march=native", "-fopenmp", "-ffp-contract=off", f"-DFINLLM_HEADERS_{headers}"]


def _module_name() -> str:
    """Keyed by this CPU's feature flags: a -march=native build cached in a shared home directory must not be
    loaded on a machine with a different instruction set."""
    flags = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags += line
                break
    except OSError:
        pass
    return f"finllm_cpu_kernels_v{_VERSION}_{hashlib.sha1(flags.encode()).hexdigest()[:10]}"


@functools.cache
def native_ops() -> ModuleType | None:
    """The compiled module, or None when disabled (FINLLM_NATIVE_KERNELS=0) or when the build fails."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return None
    name = _module_name()
    try:
        from torch.utils.cpp_extension import load  # noqa: PLC0415 - heavy import, only when needed

        _ensure_ninja_on_path()
        if not _already_built(name):
            print("building the native CPU kernels (once per machine, under a minute)...",
                  file=sys.stderr, flush=True)
        return load(name=name, sources=[str(s) for s in _SOURCES], extra_cflags=_flags(),
                    extra_ldflags=["-fopenmp"], verbose=False)
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


def _already_built(name: str) -> bool:
    try:
        from torch.utils.cpp_extension import _get_build_directory  # noqa: PLC0415

        return any(Path(_get_build_directory(name, verbose=False)).glob(f"{name}*.so"))
    except Exception:
        return False

