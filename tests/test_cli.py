"""The `pipeline` CLI: subcommands, defensive registration, run + inspect on a tiny model."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from pipeline import cli
from tests.helpers.pipeline_inputs import write_sample_inputs


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for name in ("run", "inspect", "eval", "bench", "quantize"):
        assert name in text


def test_missing_optional_module_gives_a_clear_message(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.import_module

    def fake_import(name: str, *a: object, **k: object) -> object:
        if name in ("eval.evaluate", "bench.cli"):
            raise ModuleNotFoundError(f"No module named '{name}'")
        return real(name, *a, **k)

    monkeypatch.setattr(cli.importlib, "import_module", fake_import)
    assert cli.main(["bench", "--anything"]) == 2
    assert "pipeline bench is unavailable" in capsys.readouterr().err
    assert cli.main(["eval"]) == 2
    assert "eval.evaluate" in capsys.readouterr().err


def test_run_reports_a_missing_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in").mkdir()
    rc = cli.main(["run", "--input", str(tmp_path / "in"), "--model", str(tmp_path / "nope"), "--no-progress"])
    assert rc == 2 and "model not found" in capsys.readouterr().out


def test_run_rejects_a_missing_input_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--input", str(tmp_path / "absent"), "--no-progress"]) == 2
    text = capsys.readouterr().out
    assert "input_dir: input directory not found" in text
    assert len(text.strip().splitlines()) == 1 and "pydantic" not in text  # one line, no validation report


def test_a_file_that_is_no_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "random.bin").write_bytes(bytes(range(256)) * 4)
    rc = cli.main(["run", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--model",
                   str(tmp_path / "random.bin"), "--no-progress"])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert rc == 2 and "model not usable" in text and "not a GGUF file" in text
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("pipeline 0.")


_BLOCKED_RUN = """
import sys, time
from pathlib import Path
import pipeline.run
from pipeline import cli
def blocked(cfg):
    Path(sys.argv[1]).write_text("started")
    time.sleep(60)
pipeline.run.run_pipeline = blocked
sys.exit(cli.main(["run", "--input", sys.argv[2], "--output", sys.argv[3], "--model", sys.argv[4], "--no-progress"]))
"""


def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path, fake_model: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "in").mkdir()
    started = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKED_RUN, str(started), str(tmp_path / "in"),
                             str(tmp_path / "out"), str(fake_model)], cwd=Path(__file__).parents[1],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err and [ln for ln in err.splitlines() if ln.strip()] == [
        "interrupted: `pipeline run` stopped; work already staged is kept and the same command resumes it"]


def test_inspect_takes_output_as_run_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for target in (tmp_path / "absent", tmp_path / "empty"):
        if target.name == "empty":
            target.mkdir()
        rc_named = cli.main(["inspect", "--output", str(target)])
        named = capsys.readouterr()
        rc_positional = cli.main(["inspect", str(target)])
        positional = capsys.readouterr()
        assert (rc_named, named) == (rc_positional, positional) and str(target) in named.out + named.err


def test_run_then_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers.checkpoints import make_checkpoint

    model = make_checkpoint(tmp_path / "model", "llama")
    write_sample_inputs(tmp_path / "in", n_pdfs=2)
    out = tmp_path / "out"
    rc = cli.main(["run", "--input", str(tmp_path / "in"), "--output", str(out), "--model", str(model),
                   "--run-date", "2024-06-30", "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0 and "reconciled" in text and "yes" in text
    assert (out / "manifests" / "run_date=2024-06-30").is_dir()
    assert cli.main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "transactions" in text and "2024-06-30" in text and "errors by stage and class" in text
