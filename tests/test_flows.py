"""Prefect flows: a backfill over three dates (partitions, idempotent re-run, forced re-run of one
date), the daily flow (stage tasks, ingest cache, markdown artifact), the model loaded once per
process; plus server-free checks of the CLI, deployment config and cache keys.

One session-scoped Prefect test harness (temporary PREFECT_HOME, local SQLite server); the fake
engine from tests/helpers/fake_llm.py is injected as `engine.LLM`, so the pipeline's real
per-process model cache decides how often it is constructed."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import inspect
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import cli
from pipeline.output.sink import read_dataset
from tests.helpers.fake_llm import FakeLLM
from tests.helpers.pipeline_inputs import INVOICE_TEXT, make_pdf

REPO = Path(__file__).resolve().parents[1]
DAYS = ("2024-05-01", "2024-05-02", "2024-05-03")
DATA = ("documents", "account_windows", "transactions", "errors")


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A temporary Prefect server and PREFECT_HOME for the whole session (server start-up is slow)."""
    home = tmp_path_factory.mktemp("prefect-home")
    mp = pytest.MonkeyPatch()
    mp.setenv("PREFECT_HOME", str(home))
    mp.delenv("PREFECT_API_URL", raising=False)
    mp.delenv("PREFECT_PROFILES_PATH", raising=False)
    mp.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.settings import temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    try:
        with temporary_settings(updates={"home": home, "results.local_storage_path": home / "storage",
                                         "server.analytics_enabled": False}):
            with prefect_test_harness(server_startup_timeout=300):
                yield home
    finally:
        mp.undo()


class CountingLLM(FakeLLM):
    """`engine.LLM` stand-in that records each construction (i.e. each model load)."""

    loads: list[str] = []

    def __init__(self, model_dir: str, **engine_kwargs: Any) -> None:
        super().__init__()
        CountingLLM.loads.append(str(model_dir))


@pytest.fixture()
def fake_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A model dir (config only) whose engine is the fake; returns the dir."""
    import engine

    monkeypatch.setattr(engine, "LLM", CountingLLM)
    monkeypatch.setattr(engine, "load_tokenizer", lambda _model: FakeLLM().tokenizer)  # no chat template
    monkeypatch.setattr(CountingLLM, "loads", [])
    model = tmp_path / "fake-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


def _day_inputs(root: Path, day: str, i: int) -> Path:
    """Distinct content per date (row ids are content hashes): two invoices, a card log with a bad line."""
    d = root / day
    for k in range(2):
        make_pdf(d / "docs" / f"invoice_{k}.pdf", [INVOICE_TEXT.format(n=10 * i + k, d=i + 1, amt=f"{100 + i}.{k}0")])
    (d / "logs").mkdir(parents=True, exist_ok=True)
    (d / "logs" / "card.jsonl").write_text(
        f'{{"date": "{day}", "amount": -{i + 1}.25, "currency": "EUR", "payee": "Cafe {i}", "memo": "coffee"}}\n'
        "not json\n"
        f'{{"date": "{day}", "amount": {10 + i}, "currency": "EUR", "payee": "Shop", "memo": "refund"}}\n')
    return d


def _counts(out: Path) -> Counter:
    return Counter((ds, r["run_date"]) for ds in DATA for r in read_dataset(out, ds).select(["run_date"]).to_pylist())


def _files(out: Path, day: str) -> dict[str, tuple[int, int]]:
    """Every published file of one partition with (inode, mtime): changes iff the file was rewritten."""
    return {str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for ds in DATA for p in sorted((out / ds / f"run_date={day}").glob("*.parquet"))}


def _manifests(out: Path, day: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "manifests" / f"run_date={day}").glob("*.json"))]


# ---------------------------------------------------------------- with the Prefect harness

def test_backfill_three_dates_rerun_and_forced_date(prefect_harness: Path, fake_engine: Path, tmp_path: Path) -> None:
    root, out = tmp_path / "in", tmp_path / "out"
    for i, day in enumerate(DAYS):
        _day_inputs(root, day, i)
    cmd = ["backfill", "--input-root", str(root), "--output", str(out), "--model", str(fake_engine)]

    assert cli.main([*cmd, "--start", DAYS[0], "--end", DAYS[-1], "--max-concurrency", "2"]) == 0
    counts = _counts(out)
    for day in DAYS:  # three partitions, each with its own documents, transactions and errors
        assert {ds: counts[(ds, day)] for ds in DATA if ds != "account_windows"} == {
            "documents": 2, "transactions": 2, "errors": 1}
        assert [m["reconciliation"]["balanced"] for m in _manifests(out, day)] == [True]
    # one window for the card's May, over the three days' rows, whichever date's run computed it last
    windows = read_dataset(out, "account_windows").to_pylist()
    assert [(w["account"], w["tx_count"]) for w in windows] == [("card", 6)]
    assert CountingLLM.loads == [str(fake_engine.resolve())]  # one model load for the whole backfill

    before = {day: _files(out, day) for day in DAYS}
    assert cli.main([*cmd, "--start", DAYS[0], "--end", DAYS[-1]]) == 0
    assert _counts(out) == counts
    assert {day: _files(out, day) for day in DAYS} == before
    assert [len(_manifests(out, day)) for day in DAYS] == [1, 1, 1]  # complete dates were skipped, not re-run

    assert cli.main([*cmd, "--start", DAYS[1], "--end", DAYS[1], "--force"]) == 0
    assert _counts(out) == counts
    after = {day: _files(out, day) for day in DAYS}
    assert after[DAYS[0]] == before[DAYS[0]] and after[DAYS[2]] == before[DAYS[2]]
    # every file of the date rewritten, under new names (a name never reappears with other contents)
    assert len(after[DAYS[1]]) == len(before[DAYS[1]]) and not after[DAYS[1]].keys() & before[DAYS[1]].keys()
    forced = [m for m in _manifests(out, DAYS[1]) if m["force"]]
    assert len(forced) == 1 and forced[0]["reconciliation"]["documents_output"] == 2
    assert CountingLLM.loads == [str(fake_engine.resolve())]


def _stored_bytes(path: Path) -> bytes:
    """A file's bytes, followed by every base64 string value of it that is JSON."""
    import base64
    import binascii

    raw = path.read_bytes()
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw
    parts, todo = [raw], [doc]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, str) and len(v) > 16:
            try:
                parts.append(base64.b64decode(v))
            except (binascii.Error, ValueError):
                pass
    return b"\n".join(parts)


def test_daily_flow_tasks_artifact_and_no_document_text_in_prefect(prefect_harness: Path, fake_engine: Path, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, FlowRunFilter, FlowRunFilterId

    from flows.daily import daily_flow

    root = tmp_path / "in"
    _day_inputs(root, DAYS[0], 7)
    states = [daily_flow(input_root=str(root), output_dir=str(tmp_path / name), run_date=dt.date.fromisoformat(DAYS[0]),
                         model_dir=str(fake_engine), return_state=True) for name in ("a", "b")]
    result = states[0].result()
    assert result["status"] == "ran" and result["balanced"] and result["outputs"]["documents"] == 2
    assert Path(result["partitions"]["documents"]).is_dir()
    assert _counts(tmp_path / "a") == _counts(tmp_path / "b")

    run_ids = [s.state_details.flow_run_id for s in states]
    with get_client(sync_client=True) as client:
        runs = [client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[i]))) for i in run_ids]
        by_run = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=run_ids))
        artifacts = client.read_artifacts(artifact_filter=by_run)
    names = [r.name for r in runs[0]]
    stages = ("ingest-", "load-model-", "prepare-requests-", "infer-document-", "infer-window-", "write-partition-")
    for stage in stages:
        assert any(n.startswith(stage) for n in names), (stage, names)
    ingest_states = [next(r.state_name for r in rs if r.name.startswith("ingest")) for rs in runs]
    assert ingest_states == ["Completed", "Completed"]  # no task result is kept by Prefect, so none is reused
    assert CountingLLM.loads == [str(fake_engine.resolve())]
    # nothing a document or a log says is stored under PREFECT_HOME (Prefect keeps a result as JSON around a
    # base64 pickle: both are searched)
    stored = [_stored_bytes(p) for p in prefect_harness.rglob("*") if p.is_file()]
    for secret in (b"Example Supplies", b"Test Customer", b"DE02120300000000202051", b"Cafe 0"):
        assert not [b for b in stored if secret in b], secret

    assert sorted(a.key for a in artifacts) == [f"pipeline-run-{DAYS[0]}"] * 2
    md = artifacts[0].data
    assert f"# Pipeline run {DAYS[0]}" in md and "run_date=2024-05-01" in md
    assert "| documents (PDF files) | 2 | 2 | 0 | 0 |" in md and "| transaction rows | 3 | 2 | 1 | 0 |" in md
    assert "## Errors" in md and "| ingest | 1 |" in md
    assert "## Throughput" in md and "requests/s" in md


# ---------------------------------------------------------------- no server needed

def test_scheduled_run_date_is_the_schedule_day_in_its_timezone() -> None:
    from flows.daily import partition_date

    when = dt.datetime(2024, 5, 1, 23, 30, tzinfo=dt.timezone.utc)
    assert partition_date(when) == dt.date(2024, 5, 1)
    assert partition_date(when, "Europe/Berlin") == dt.date(2024, 5, 2)


def test_deployments_match_the_flows() -> None:
    import yaml
    from prefect.client.schemas.schedules import CronSchedule

    from flows.serve import build_deployments

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert set(deployments) == {"nightly", "backfill"}
    for dep in deployments.values():
        path, name = dep["entrypoint"].split(":")
        fl = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)
        assert set(dep["parameters"]) <= set(inspect.signature(fl.fn).parameters), dep["name"]
    (sched,) = deployments["nightly"]["schedules"]
    assert CronSchedule(cron=sched["cron"], timezone=sched["timezone"]).cron == "0 2 * * *"
    served = {d.name: d for d in build_deployments("/in", "/out", cron="30 1 * * *", timezone="Europe/Berlin")}
    assert served["nightly"].schedules[0].schedule.cron == "30 1 * * *" and not served["backfill"].schedules
    assert served["nightly"].parameters["input_root"] == "/in"


_NO_PREFECT = """
import sys
sys.modules["prefect"] = None  # `import prefect` raises ImportError
from pipeline import cli
assert cli.main(["backfill", "--input-root", "x", "--start", "2024-05-01", "--end", "2024-05-02"]) == 2
assert cli.main(["run", "--input", "/nonexistent-input-dir", "--no-progress"]) == 2
assert not any(m == "prefect" or m.startswith("prefect.") for m in sys.modules if sys.modules[m] is not None)
"""


def test_cli_works_without_prefect() -> None:
    proc = subprocess.run([sys.executable, "-c", _NO_PREFECT], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert "pipeline backfill is unavailable" in proc.stderr and "input directory not found" in proc.stdout


def test_backfill_takes_the_run_options_of_pipeline_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pipeline backfill` has every option of one run that `pipeline run` has (both from
    `pipeline.cli.add_run_options`), and hands them to the daily flows as RunConfig fields."""
    import flows.backfill
    from flows.daily import day_config

    def options_of(command: str) -> set[str]:
        parser = cli.build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
        return {o for a in sub._actions for o in a.option_strings}

    per_run = options_of("run") - {"--input", "--run-date", "--no-progress"}
    assert per_run <= options_of("backfill")

    seen: dict = {}
    monkeypatch.setattr(flows.backfill, "backfill_flow", lambda **kw: seen.update(kw) or [])
    assert cli.main(["backfill", "--input-root", str(tmp_path), "--start", "2024-05-01", "--end", "2024-05-02",
                     "--extraction", "model", "--exclude", "scans/*", "--no-ocr", "--max-pages", "9",
                     "--keep-history", "--default-currency", "EUR", "--section-tokens", "512"]) == 0
    options = seen["options"]
    (tmp_path / "2024-05-01").mkdir()
    cfg = day_config(tmp_path, tmp_path / "out", dt.date(2024, 5, 1), options=options)
    assert (cfg.extraction, cfg.exclude, cfg.limits.ocr, cfg.limits.max_pages, cfg.keep_history,
            cfg.default_currency, cfg.section_tokens) == ("model", ["scans/*"], False, 9, True, "EUR", 512)
    json.dumps(options)  # a flow parameter: JSON values only


def test_daily_flow_on_ray_actors_writes_the_in_process_rows(prefect_harness: Path, tmp_path: Path) -> None:
    """The flows take the executor option: the same day through two Ray engine actors (a local cluster the run
    starts and stops) publishes exactly the rows of the in-process flow run."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    from flows.daily import daily_flow

    root = tmp_path / "in"
    _day_inputs(root, DAYS[0], 3)
    demo = str(REPO / "data" / "models" / "finextract-3m")
    day = dt.date.fromisoformat(DAYS[0])
    local = daily_flow(input_root=str(root), output_dir=str(tmp_path / "local"), run_date=day, model_dir=demo)
    on_ray = daily_flow(input_root=str(root), output_dir=str(tmp_path / "ray"), run_date=day, model_dir=demo,
                        options={"executor": {"kind": "ray", "replicas": 2}, "bucket_size": 1})
    assert local["balanced"] and on_ray["balanced"] and on_ray["outputs"] == local["outputs"]
    for ds in DATA:
        rows = [sorted(read_dataset(tmp_path / name, ds).drop_columns(["field_logprobs"] if ds == "documents"
                                                                       else []).to_pylist(), key=str)
                for name in ("local", "ray")]
        assert rows[0] == rows[1], ds
