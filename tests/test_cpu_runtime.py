"""Process-level CPU settings: the allocator tuning applies on glibc and respects an operator's own choice."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

import pytest

from engine.cpu_runtime import keep_freed_memory


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
