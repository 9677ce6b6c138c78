"""Process-level CPU settings: the allocator tuning applies on glibc and respects an operator's own choice."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

import pytest

from engine.cpu_runtime import keep_freed_memory, return_freed_memory


def _glibc() -> bool:
    path = ctypes.util.find_library("c")
    return sys.platform.startswith("linux") and path is not None and hasattr(ctypes.CDLL(path), "gnu_get_libc_version")


@pytest.mark.skipif(not _glibc(), reason="mallopt tuning is glibc-only")
def test_allocator_tuned_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("MALLOC_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("LD_PRELOAD", "")
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent


@pytest.mark.parametrize("var,value", [("MALLOC_ARENA_MAX", "2"), ("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")])
def test_operator_allocator_choice_is_left_alone(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    assert keep_freed_memory() is False



def test_openmp_waiting_default_is_a_bounded_spin_unless_the_operator_chose() -> None:
    import sys

    from engine.cpu_runtime import OMP_SPIN_COUNT, configure_cpu_threads

    assert "torch" in sys.modules  # here torch is loaded: too late to change anything, so nothing is set
    env: dict[str, str] = {}
    configure_cpu_threads(env)
    assert env == {}
    torch_mod = sys.modules.pop("torch")
    try:
        env = {}
        configure_cpu_threads(env)
        assert env == {"GOMP_SPINCOUNT": OMP_SPIN_COUNT}
        for chosen in ({"OMP_WAIT_POLICY": "PASSIVE"}, {"GOMP_SPINCOUNT": "0"}):
            env = dict(chosen)
            configure_cpu_threads(env)
            assert env == chosen
    finally:
        sys.modules["torch"] = torch_mod


def test_importing_the_packages_changes_no_environment_variable() -> None:
    """Library users decide their process environment; only the CLI entry point applies the OpenMP default."""
    import subprocess
    import sys

    # third-party libraries first (polars sets its allocator's variable on import): only our own imports count
    code = ("import os, polars, pyarrow, pydantic; before = dict(os.environ); "
            "import engine, pipeline, pipeline.run, bench, eval; "
            "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)); "
            "print(changed)")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


def test_the_cli_entry_point_applies_the_openmp_default_before_torch_loads() -> None:
    import subprocess
    import sys

    code = ("import os, sys; from pipeline.cli import main; main(['models', 'list']); "
            "print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().splitlines()[-1].split()[0] == "20000"


_FREED_CHILD = """
import os
from engine.cpu_runtime import keep_freed_memory, return_freed_memory
from pipeline.ingest.worker import rss_bytes
assert keep_freed_memory()
blocks = [bytearray(b"x" * (1 << 20)) for _ in range(300)]  # heap chunks below the raised mmap threshold
del blocks
kept = rss_bytes(os.getpid())
return_freed_memory()
print(kept - rss_bytes(os.getpid()))
"""


@pytest.mark.skipif(not _glibc(), reason="malloc_trim is glibc-only")
def test_freed_memory_kept_by_the_engine_allocator_setting_goes_back_when_asked() -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "LD_PRELOAD"}
    out = subprocess.run([sys.executable, "-c", _FREED_CHILD], capture_output=True, text=True, env=env, check=True)
    assert int(out.stdout) > 200 << 20  # of the 300 MiB freed but kept, most is handed back


def test_handing_memory_back_starts_no_child_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run hands memory back after every bucket; looking the C library up each time ran `ldconfig -p` in a child
    process (a fork of the whole engine process, counted twice by a peak-memory sampler). Once is enough."""
    import subprocess

    return_freed_memory(collect=False)  # the first call may look the library up
    started: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise OSError("no child processes here")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    for _ in range(3):
        return_freed_memory(collect=False)
    assert started == []
