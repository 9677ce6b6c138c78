"""Faults an operator meets with files that change under a run and runs that die (issue 43): the bytes read are the
bytes hashed, and an ingest worker never outlives its run or its time limit."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.ingest import IngestLimits, ingest
from pipeline.ingest import discover as discover_mod
from pipeline.ingest.worker import FileTask, FileWorker

HEADER = "date,amount,currency,counterparty,description,account\n"


def _log(n: int) -> str:
    return HEADER + "".join(f"2024-03-{1 + i % 28:02d},-1.00,EUR,Shop,item {i},ACC-1\n" for i in range(n))


def _errors(res) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {e["source_file"]: e["error_class"] for e in res.errors.to_pylist()}


def _hash_then(monkeypatch: pytest.MonkeyPatch, change) -> None:  # type: ignore[no-untyped-def]
    """The race made deterministic: the file changes right after discovery hashed it, before the worker reads."""
    real = discover_mod.file_sha256

    def hashed_then_changed(path):  # type: ignore[no-untyped-def]
        sha = real(path)
        change(Path(path))
        return sha

    monkeypatch.setattr(discover_mod, "file_sha256", hashed_then_changed)


def test_a_file_replaced_between_hashing_and_reading_is_left_out_and_the_rerun_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: 202 rows stored under the 200-row file's hash (and the re-run added 202 more)."""
    log = tmp_path / "log.csv"
    log.write_text(_log(200))
    _hash_then(monkeypatch, lambda p: p.write_text(_log(202)))
    res = ingest(tmp_path)
    assert _errors(res) == {"log.csv": "FileChanged"}
    assert res.transactions.num_rows == 0
    assert "changed while this run read it" in res.errors.column("message")[0].as_py()
    monkeypatch.undo()
    again = ingest(tmp_path)
    assert again.errors.num_rows == 0 and again.transactions.num_rows == 202


def test_a_file_still_being_written_never_stores_its_torn_last_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hashed while the upload had written '-19' of '-1969.56': that value is never stored as a row."""
    log = tmp_path / "upload.csv"
    log.write_text(_log(10) + "2024-03-30,-19")
    _hash_then(monkeypatch, lambda p: p.open("a").write("69.56,EUR,Shop,torn,ACC-1\n"))
    res = ingest(tmp_path)
    assert _errors(res) == {"upload.csv": "FileChanged"} and res.transactions.num_rows == 0
    monkeypatch.undo()
    again = ingest(tmp_path)
    amounts = [str(a) for a in again.transactions.column("amount").to_pylist()]
    assert len(amounts) == 11 and amounts[-1] == "-1969.5600"


def test_a_file_that_grows_while_its_parser_reads_it_is_left_out(tmp_path: Path) -> None:
    """The worker read the bytes discovery hashed, but the file grew before the read ended: its size and mtime
    say so."""
    from tests.helpers.hostile_parsers import hostile_parse

    (tmp_path / "growing.csv").write_text(_log(5))
    (tmp_path / "steady.csv").write_text(_log(3))
    limits = IngestLimits()
    with FileWorker(limits, parser=hostile_parse) as worker:
        res = ingest(tmp_path, limits=limits, worker=worker)
    assert _errors(res) == {"growing.csv": "FileChanged"}
    assert set(res.transactions.column("source_file").to_pylist()) == {"steady.csv"}


def test_a_streamed_log_replaced_during_the_run_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.csv").write_text(_log(3000))
    _hash_then(monkeypatch, lambda p: p.write_text(_log(3001)))
    limits = IngestLimits(stream_log_bytes=10_000)
    res = ingest(tmp_path, limits=limits)
    assert _errors(res) == {"big.csv": "FileChanged"}
    assert not res.spooled


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_sigkilled_run_leaves_no_parser_alive(tmp_path: Path) -> None:
    """Was: the worker parsing a slow file lived on after its run was SIGKILLed."""
    script = textwrap.dedent(f"""
        import sys
        from pipeline.ingest import IngestLimits
        from pipeline.ingest.worker import FileTask, FileWorker
        from tests.helpers.hostile_parsers import sleep_forever
        w = FileWorker(IngestLimits(), parser=sleep_forever)
        w._start()
        print(w._proc.pid, flush=True)
        w.parse(FileTask("transactions", {str(tmp_path / 'x.csv')!r}, "x.csv", "sha"), 10)
    """)
    (tmp_path / "x.csv").write_text(_log(1))
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                           cwd=Path(__file__).resolve().parent.parent)
    worker_pid = int(run.stdout.readline())  # type: ignore[union-attr]
    time.sleep(0.5)  # the task is being parsed
    assert _alive(worker_pid)
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 10
    while _alive(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker_pid)


def test_a_worker_ends_a_parse_past_its_time_limit_on_its_own(tmp_path: Path) -> None:
    """Even when nobody watches the clock (the run stalled or is stopped), a parse cannot outlast its budget by
    more than the worker's grace."""
    from tests.helpers.hostile_parsers import sleep_forever

    (tmp_path / "x.csv").write_text(_log(1))
    with FileWorker(IngestLimits(), parser=sleep_forever) as worker:
        worker._start()
        proc = worker._proc
        assert proc is not None and worker._send is not None
        worker._send.send((FileTask("transactions", str(tmp_path / "x.csv"), "x.csv", "sha"), 0.5))
        started = time.monotonic()
        code = proc.wait(timeout=30)
        assert code == -signal.SIGALRM and time.monotonic() - started < 15
