"""The native kernels' build cache (issue 42): keyed by what decides the binary, built aside and renamed into place,
builders taking turns through a lock the kernel releases when its holder dies. The compiler is replaced by a stand-in
here (a real build takes minutes); `python -m kernels.cpu` and the kernel tests exercise the real one."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from kernels.cpu import build
from kernels.cpu.build import kernel_key, load_or_build

NAME = "finllm_cpu_kernels_test"


def _stand_in(calls: list[Path]):  # type: ignore[no-untyped-def]
    def compile_into(build_dir: Path) -> types.ModuleType:
        calls.append(build_dir)
        (build_dir / f"{NAME}.so").write_bytes(b"built")
        return types.ModuleType(NAME)

    return compile_into


def test_the_key_changes_with_everything_that_decides_the_binary() -> None:
    base = dict(sources=[b"int f();"], flags=["-O3"], torch_version="2.13.0", python="3.11.7", cxx="c++", cpu="avx2")
    keys = {kernel_key(**base)}
    for field, other in (("sources", [b"int g();"]), ("flags", ["-O2"]), ("torch_version", "2.12.0"),
                         ("python", "3.12.1"), ("cxx", "clang++"), ("cpu", "avx512f")):
        keys.add(kernel_key(**{**base, field: other}))
    assert len(keys) == 7
    assert kernel_key(**base) == kernel_key(**base)


_KILLED_BUILDER = """
import sys, time, types
from pathlib import Path
from kernels.cpu.build import load_or_build
def compile_into(build_dir):
    (build_dir / "lock").write_text("")  # what torch's builder leaves when it is killed
    (build_dir / "half.o").write_bytes(b"")
    time.sleep(120)
load_or_build(Path(sys.argv[1]), sys.argv[2], compile_into)
"""


def test_a_build_killed_midway_leaves_nothing_a_later_run_waits_on(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_BUILDER, str(tmp_path), NAME], cwd=Path(__file__).parents[1],
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(f"{NAME}.build-*/half.o")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / NAME).exists()  # nothing half-built in place
    calls: list[Path] = []
    module = load_or_build(tmp_path, NAME, _stand_in(calls), wait_s=5)
    assert module is not None and len(calls) == 1
    assert (tmp_path / NAME / f"{NAME}.so").read_bytes() == b"built"
    assert list(tmp_path.glob(f"{NAME}.build-*")) == []  # the killed build's folder is gone


def test_a_run_waits_for_a_live_builder_then_falls_back_and_says_so(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    with open(tmp_path / f"{NAME}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        calls: list[Path] = []
        with caplog.at_level(logging.WARNING):
            assert load_or_build(tmp_path, NAME, _stand_in(calls), wait_s=1) is None
    assert calls == [] and "torch reference kernels" in caplog.text


def test_a_built_module_is_loaded_without_the_lock_or_a_build(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / NAME).mkdir()
    (tmp_path / NAME / f"{NAME}.so").write_bytes(b"built")
    loaded = types.ModuleType(NAME)
    monkeypatch.setattr(build, "_import", lambda name, path: loaded)
    calls: list[Path] = []
    with open(tmp_path / f"{NAME}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a builder of another version holds the lock: no matter
        assert load_or_build(tmp_path, NAME, _stand_in(calls), wait_s=0) is loaded
    assert calls == []


def test_two_checkouts_with_different_sources_get_different_modules(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    first = build._module_name()
    changed = tmp_path / "bindings.cpp"
    changed.write_bytes(build._SOURCES[0].read_bytes() + b"\n// another checkout's edit\n")
    monkeypatch.setattr(build, "_SOURCES", [changed, *build._SOURCES[1:]])
    assert build._module_name() != first
