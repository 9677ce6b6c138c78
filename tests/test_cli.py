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
    assert "input directory not found" in capsys.readouterr().out


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
