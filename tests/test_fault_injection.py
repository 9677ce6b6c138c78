"""Fault injection: SIGKILL a whole run at random filesystem steps (ingest staging, buckets, commit, publish and
cleanup), then run again; the output must equal an uninterrupted run's, row for row: nothing lost, nothing
duplicated, and the folder never locked."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import RunConfig
from pipeline.run import run_pipeline
from pipeline.output.sink import read_dataset
from tests.helpers.fake_llm import FakeLLM
from tests.helpers.pipeline_inputs import write_sample_inputs

REPO = Path(__file__).resolve().parents[1]
DATASETS = ("documents", "account_windows", "transactions", "errors")


def _kill_at(inp: Path, out: Path, model: Path, n: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.helpers.kill_at_step", str(inp), str(out), str(model), str(n)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def _rows(out: Path) -> dict[str, list[tuple]]:
    return {ds: sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in read_dataset(out, ds).to_pylist())
            for ds in DATASETS}


def _rerun(inp: Path, out: Path, model: Path) -> dict:
    cfg = RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False,
                    bucket_size=2)
    return run_pipeline(cfg, llm=FakeLLM()).manifest


def test_sigkill_at_random_steps_then_rerun_loses_and_duplicates_nothing(tmp_path: Path, fake_model: Path) -> None:
    inp = tmp_path / "in"
    write_sample_inputs(inp)
    baseline = _kill_at(inp, tmp_path / "baseline", fake_model, 10**9)
    assert baseline.returncode == 0, baseline.stderr
    total = int(baseline.stdout.split()[-1])
    want = _rows(tmp_path / "baseline")
    assert all(want[ds] for ds in DATASETS)
    rng = random.Random(20)
    tail = total * 2 // 3  # the last third: commit, publish and cleanup
    # eight kills (each a fresh process and a rerun: ~12 s apiece), most where the run commits and publishes
    points = sorted(set(rng.sample(range(1, tail), 3)) | set(rng.sample(range(tail, total + 1), 4)) | {total})
    for n in points:
        out = tmp_path / f"kill{n}"
        killed = _kill_at(inp, out, fake_model, n)
        assert killed.returncode == -signal.SIGKILL, f"step {n}: {killed.returncode} {killed.stderr[-500:]}"
        manifest = _rerun(inp, out, fake_model)
        assert manifest["reconciliation"]["balanced"], f"step {n}"
        got = _rows(out)
        for ds in DATASETS:
            ids = [dict(r)["row_id"] for r in got[ds]]
            assert len(ids) == len(set(ids)), f"step {n}: duplicated {ds} rows"
            assert got[ds] == want[ds], f"step {n}: {ds} differs from the uninterrupted run"
        assert not any((out / "_staging").iterdir()), f"step {n}: staging left behind"


@pytest.mark.parametrize("n", [1, 2])
def test_a_kill_during_the_very_first_steps_leaves_a_usable_folder(tmp_path: Path, fake_model: Path, n: int) -> None:
    inp = tmp_path / "in"
    write_sample_inputs(inp)
    assert _kill_at(inp, tmp_path / "out", fake_model, n).returncode == -signal.SIGKILL
    assert _rerun(inp, tmp_path / "out", fake_model)["reconciliation"]["balanced"]
