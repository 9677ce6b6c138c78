"""`pipeline bench --workload real`: the real job, `pipeline run` end to end on folders of documents.

What a data team waits for is a folder of PDFs becoming rows, not tokens per second on random prompts: each
configuration runs `pipeline run` in a fresh process (so model loading, kernel loading and OCR count as they do for
a user) on one folder built from the given ones, and the report gives documents per hour, the six header fields
right against the gold JSON that sits beside a PDF (`eval.real_gold`), and where the time went: the run's own
timings (discovery and hashing, parsing, OCR, planning, model load, prompt building and tokenisation, inference)
with inference split by the engine's counters into prefill steps, decode steps and sampling (grammar masks
included), the rest of it being grounding, validation and staging; and the publish, which is the wall time after
the run's timings end. Per request, TTFT, TPOT and end-to-end percentiles come from the run's manifest.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq

from eval.real_gold import SCORED_FIELDS, field_matches, load_gold_dir
from pipeline.output.manifest import latest_manifest
from pipeline.output.sink import published_parts

DOCUMENT_SUFFIXES = (".pdf", ".xml", ".html", ".htm", ".md", ".txt")


@dataclass(frozen=True)
class RealInput:
    """One file of the combined folder: where it links to, and its gold fields when a gold JSON sits beside it."""

    rel: str
    source: Path
    gold: dict[str, Any] | None


def collect_inputs(dirs: list[Path]) -> list[RealInput]:
    """Every file of each folder (not recursive) under `<folder name>/`; a gold JSON beside a PDF of the same
    stem is the PDF's expectation, not an input of its own."""
    out: list[RealInput] = []
    names: set[str] = set()
    for d in dirs:
        if not d.is_dir():
            raise FileNotFoundError(f"input folder not found: {d}")
        name = d.name
        while name in names:  # two folders of one name stay apart
            name += "_"
        names.add(name)
        try:
            gold = {g.pdf.name: g.gold for g in load_gold_dir(d)}
        except FileNotFoundError:  # a folder without gold (the shipped samples) is timed, not scored
            gold = {}
        for path in sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith((".", "_"))):
            if path.suffix.lower() == ".json" and path.with_suffix(".pdf").name in gold:
                continue
            out.append(RealInput(f"{name}/{path.name}", path.resolve(), gold.get(path.name)))
    return out


def link_inputs(inputs: list[RealInput], dest: Path) -> Path:
    """The combined input folder: hard links where the file system allows, copies elsewhere (discovery never
    follows a symbolic link)."""
    for item in inputs:
        target = dest / item.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            continue
        try:
            os.link(item.source, target)
        except OSError:
            shutil.copy2(item.source, target)
    return dest


def _documents(output_dir: Path) -> dict[str, dict[str, Any]]:
    """source_file -> the first documents row of that file (one per invoice or receipt)."""
    cols = ["source_file", *SCORED_FIELDS]
    rows: dict[str, dict[str, Any]] = {}
    for part in published_parts(output_dir, "documents"):
        for r in pq.read_table(part, columns=cols).to_pylist():
            rows.setdefault(r["source_file"], r)
    return rows


def _pred_value(name: str, value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def score(inputs: list[RealInput], output_dir: Path) -> dict[str, Any]:
    """Fields right per scored field over the inputs with gold; a document without a row (an error row instead)
    scores every field wrong."""
    docs = _documents(output_dir)
    gold_items = [i for i in inputs if i.gold is not None]
    right = dict.fromkeys(SCORED_FIELDS, 0)
    for item in gold_items:
        row = docs.get(item.rel)
        for f in SCORED_FIELDS:
            if row is not None and field_matches(f, _pred_value(f, row[f]), item.gold[f]):  # type: ignore[index]
                right[f] += 1
    n = len(gold_items)
    return {"documents_scored": n, "fields_right": sum(right.values()), "fields_scored": n * len(SCORED_FIELDS),
            "accuracy": sum(right.values()) / (n * len(SCORED_FIELDS)) if n else None, "per_field": right}


def time_split(manifest: dict[str, Any], wall_s: float) -> dict[str, float]:
    """Where the run's wall time went, from its manifest (seconds; the parts sum to the wall time)."""
    t = dict(manifest.get("timings_s", {}))
    stats = manifest.get("engine_stats", {}) or {}
    ingest_parts = {k.split(".", 1)[1]: v for k, v in t.items() if k.startswith("ingest.")}
    split: dict[str, float] = {}
    split["startup (imports, kernels, output checks)"] = max(0.0, wall_s - t.get("total", 0.0))
    for k in ("hash", "parse_documents", "parse_logs", "ocr"):
        split[f"ingest: {k}"] = ingest_parts.get(k, 0.0)
    split["ingest: other"] = max(0.0, t.get("ingest", 0.0) - sum(ingest_parts.values()))
    split["layouts (model)"] = t.get("map_layouts", 0.0)
    split["plan"] = t.get("plan", 0.0)
    split["model load"] = t.get("load_model", 0.0) + t.get("load_context_parallel_model", 0.0)
    split["prompts and tokenisation"] = t.get("prepare", 0.0)
    prefill = float(stats.get("prefill_step_s", 0.0))
    decode = float(stats.get("decode_step_s", 0.0))
    sample = float(stats.get("sample_s", 0.0))
    # sampling happens inside both kinds of step; shown once, as its own line
    split["infer: prefill steps (forward)"] = prefill * (1 - _share(sample, prefill + decode))
    split["infer: decode steps (forward)"] = decode * (1 - _share(sample, prefill + decode))
    split["infer: sampling and grammar"] = sample
    # a peer engine (bench/llamacpp_server.py, bench/hf_peer.py) reports one span: prefill, decode, grammar
    served = float(stats.get("generate_s", 0.0)) if "prefill_step_s" not in stats else 0.0
    split["infer: peer engine (prefill, decode, grammar)"] = served
    split["infer: grounding, validation, staging"] = max(0.0, t.get("infer", 0.0) - prefill - decode - served)
    accounted = sum(split.values())
    split["publish and other"] = max(0.0, wall_s - accounted)
    return {k: round(v, 2) for k, v in split.items()}


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def _request_tokens(output_dir: Path) -> list[tuple[int, int]]:
    """(prompt tokens, output tokens) of every request the run's model answered (documents, windows, sections)."""
    out = []
    for ds in ("documents", "account_windows", "filing_sections"):
        for part in published_parts(output_dir, ds):
            t = pq.read_table(part, columns=["prompt_tokens", "output_tokens"])
            out += [(p, o) for p, o in zip(t.column(0).to_pylist(), t.column(1).to_pylist()) if o]
    return out


def real_floor(output_dir: Path, manifest: dict[str, Any], rates: dict[str, float]) -> dict[str, Any]:
    """The floor of the run's inference (bench/floor.py's model: its requests' GEMM and attention FLOPs at the
    measured peaks, against the decode reads at the measured bandwidth), with no credit for the prefix cache, and
    the engine's step time as a multiple of it."""
    # lazy: the engine's checkpoint reader and the floor model load only when a run is measured
    from bench.floor import workload_floor
    from bench.shapes import ModelShape
    from engine.models.checkpoint import open_checkpoint

    engine = manifest.get("engine_config") or {}
    c = open_checkpoint(engine["model_dir"]).config
    shape = ModelShape(name=Path(engine["model_dir"]).name, arch=c.family, hidden_size=c.hidden_size,
                       num_layers=c.num_layers, num_heads=c.num_heads, num_kv_heads=c.num_kv_heads,
                       intermediate_size=c.intermediate_size, vocab_size=c.vocab_size, head_dim=c.head_dim,
                       tie_word_embeddings=c.tie_word_embeddings, qkv_bias=c.qkv_bias)
    requests = [SimpleNamespace(prompt_token_ids=range(p), output_len=o) for p, o in _request_tokens(output_dir)]
    floor = workload_floor(shape, SimpleNamespace(requests=requests), engine.get("dtype", "float32"),
                           rates["int8_ops_per_s"], rates["dense_flops_per_s"], rates["read_bytes_per_s"]).to_dict()
    stats = manifest.get("engine_stats") or {}
    steps = float(stats.get("prefill_step_s", 0.0)) + float(stats.get("decode_step_s", 0.0))
    return {**floor, "requests": len(requests), "engine_step_s": steps,
            "x_floor": steps / floor["wall_s"] if floor["wall_s"] else None}


def measure_rates(dtype: str) -> dict[str, float]:
    """This machine's int8 and dense GEMM peaks and read bandwidth, now (as the standard workload measures them)."""
    # lazy: torch and the rate probes load only when a run is measured
    import torch

    # lazy: as above
    from bench.machine import (
        measure_gemm_peak,
        measure_int8_peak,
        measure_read_bandwidth,
    )

    dense = measure_gemm_peak("cpu", getattr(torch, dtype))["flops_per_s"]
    if dtype != "float32":  # any system may compute in float32: the floor takes the faster
        dense = max(dense, measure_gemm_peak("cpu", torch.float32)["flops_per_s"])
    return {"dense_flops_per_s": dense, "int8_ops_per_s": measure_int8_peak("cpu")["flops_per_s"],
            "read_bytes_per_s": measure_read_bandwidth("cpu")["bytes_per_s"]}


def run_pipeline(input_dir: Path, output_dir: Path, extra_args: list[str], log: Path,
                 timeout_s: float | None = None, entry: tuple[str, ...] = ("-m", "pipeline", "run")
                 ) -> tuple[float, int]:
    """`pipeline run` in a fresh process (`entry`: another way in to it, e.g. through the llama.cpp peer):
    (wall seconds, exit status)."""
    cmd = [sys.executable, *entry, "--input", str(input_dir), "--output", str(output_dir), "--no-progress", *extra_args]
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        fh.write(" ".join(cmd) + "\n")
        fh.flush()
        try:
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return time.perf_counter() - t0, rc


@dataclass(frozen=True)
class PeerServer:
    """A llama-server configuration the real workload also runs through (bench/llamacpp_server.py)."""

    binary: Path
    gguf: Path
    parallel: int
    ctx_per_slot: int
    threads: int


@dataclass(frozen=True)
class HFPeer:
    """HF transformers `generate` in batches of 4 as the run's engine (bench/hf_peer.py): the naive baseline."""

    dtype: str
    cache_dir: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_peer(peer: PeerServer | HFPeer, input_dir: Path, output_dir: Path, log: Path,
             timeout_s: float | None = None) -> tuple[float, int, float]:
    """The pipeline run with a peer as its engine: (wall seconds with a server's start, exit status, the server's
    start in seconds). A server starts fresh for the run, as the engine loads for ours."""
    if isinstance(peer, HFPeer):  # loads its model inside the run, as the engine does
        wall, rc = run_pipeline(input_dir, output_dir, [], log, timeout_s, entry=(
            "-m", "bench.hf_peer", "--dtype", peer.dtype, "--cache", str(peer.cache_dir), "--"))
        return wall, rc, 0.0
    # lazy: the peer's client loads only when a peer runs
    from bench.llamacpp_server import start_server, stop_server

    port = _free_port()
    t0 = time.perf_counter()
    proc = start_server(peer.binary, peer.gguf, peer.parallel, peer.ctx_per_slot, peer.threads, port,
                        log.with_suffix(".server.log"))
    started = time.perf_counter() - t0
    try:
        wall, rc = run_pipeline(input_dir, output_dir, [], log, timeout_s,
                                entry=("-m", "bench.llamacpp_server", f"http://127.0.0.1:{port}", "--"))
    finally:
        stop_server(proc)
    return started + wall, rc, started


def run_real_bench(dirs: list[Path], out_dir: Path, configs: dict[str, list[str]], repeat: int = 1,
                   timeout_s: float | None = None, peers: dict[str, PeerServer | HFPeer] | None = None
                   ) -> dict[str, Any]:
    """Each configuration (label -> extra `pipeline run` arguments), then each peer configuration, on the
    combined folder, `repeat` times in alternation, into a fresh output folder each time; the fastest run of each
    counts."""
    inputs = collect_inputs(dirs)
    input_dir = link_inputs(inputs, out_dir / "input")
    n_docs = sum(1 for i in inputs if i.source.suffix.lower() in DOCUMENT_SUFFIXES)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    best: dict[str, dict[str, Any]] = {}
    manifests: dict[str, dict[str, Any] | None] = {}  # the manifest of each label's best run
    peers = peers or {}
    for attempt in range(max(1, repeat)):
        for label in [*configs, *peers]:
            run_out = out_dir / "runs" / f"{_slug(label)}-{attempt}"
            if run_out.exists():
                raise FileExistsError(f"{run_out} exists: give the bench a fresh --out")
            log = out_dir / "logs" / f"{_slug(label)}-{attempt}.log"
            row: dict[str, Any] = {"label": label, "output_dir": str(run_out)}
            if label in configs:
                wall, rc = run_pipeline(input_dir, run_out, configs[label], log, timeout_s)
                row["args"] = configs[label]
            else:
                peer = peers[label]
                wall, rc, started = run_peer(peer, input_dir, run_out, log, timeout_s)
                row.update({"peer": {k: str(v) if isinstance(v, Path) else v for k, v in vars(peer).items()},
                            "server_start_s": round(started, 2)})
            manifest = latest_manifest(run_out) if rc == 0 else None
            row.update({"exit_status": rc, "wall_s": round(wall, 2)})
            if manifest is not None:
                stats = manifest.get("engine_stats", {}) or {}
                row.update({
                    "documents_per_hour": n_docs / wall * 3600,
                    "time_split_s": time_split(manifest, wall),
                    "prompt_tokens": stats.get("prompt_tokens"), "output_tokens": stats.get("output_tokens"),
                    "prefill_tokens_computed": stats.get("prefill_tokens_computed"),
                    "prefix_cache_hit_rate": stats.get("prefix_cache_hit_rate"),
                    "request_latency_s": manifest.get("request_latency_s", {}),
                    "score": score(inputs, run_out),
                })
            if label not in best or (row.get("documents_per_hour") or 0) > (best[label].get("documents_per_hour") or 0):
                best[label], manifests[label] = row, manifest
    # the floor is the engine's (its model's shape and dtype); a peer's row has its own span instead
    measured = [(best[label], m) for label, m in manifests.items() if m is not None and label not in peers]
    if measured and (measured[0][1].get("engine_config") or {}).get("device") == "cpu":
        rates = measure_rates(measured[0][1]["engine_config"].get("dtype", "float32"))
        for row, manifest in measured:  # each run's output folder is its own: one manifest in it
            row["floor"] = real_floor(Path(row["output_dir"]), manifest, rates)
    base = next(iter(best.values()), None)
    for row in best.values():
        if base is not None and row.get("documents_per_hour") and base.get("documents_per_hour"):
            row["x_documents_per_hour"] = row["documents_per_hour"] / base["documents_per_hour"]
            if row["score"]["accuracy"] is not None and base["score"]["accuracy"] is not None:
                row["accuracy_delta_points"] = 100 * (row["score"]["accuracy"] - base["score"]["accuracy"])
    results = {"workload": "real", "folders": [str(d) for d in dirs], "documents": n_docs,
               "files": len(inputs), "documents_with_gold": sum(1 for i in inputs if i.gold is not None),
               "repeat": repeat, "runs": list(best.values())}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "real.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in label).strip("-") or "run"


def render_real(results: dict[str, Any], console: Any) -> None:
    from rich.table import Table  # noqa: PLC0415

    t = Table(title=f"pipeline bench --workload real: {results['documents']} documents "
                    f"({results['documents_with_gold']} with gold) in {', '.join(results['folders'])}")
    for col in ("configuration", "wall s", "docs/hour", "x", "fields right", "accuracy", "delta pts"):
        t.add_column(col, justify="left" if col == "configuration" else "right")
    for r in results["runs"]:
        sc = r.get("score") or {}
        t.add_row(r["label"], f"{r['wall_s']:.0f}",
                  f"{r['documents_per_hour']:.0f}" if r.get("documents_per_hour") else f"exit {r['exit_status']}",
                  f"{r['x_documents_per_hour']:.2f}x" if r.get("x_documents_per_hour") else "-",
                  f"{sc.get('fields_right', 0)} / {sc.get('fields_scored', 0)}",
                  f"{sc['accuracy']:.1%}" if sc.get("accuracy") is not None else "-",
                  f"{r['accuracy_delta_points']:+.1f}" if "accuracy_delta_points" in r else "-")
    console.print(t)
    for r in results["runs"]:
        if r.get("time_split_s"):
            parts = ", ".join(f"{k} {v:.1f}" for k, v in r["time_split_s"].items() if v >= 0.05)
            console.print(f"[bold]{r['label']}[/bold] time split (s): {parts}")
        if r.get("floor"):
            f = r["floor"]
            console.print(f"[bold]{r['label']}[/bold] inference floor: {f['wall_s']:.1f} s for {f['requests']} "
                          f"requests (compute {f['compute_s']:.1f} s, reads {f['memory_s']:.1f} s); engine steps "
                          f"{f['engine_step_s']:.1f} s = {f['x_floor']:.2f}x the floor")
        if r.get("request_latency_s"):
            parts = ", ".join(f"{k} " + "/".join(f"{v:.3g}" for v in q.values())
                              for k, q in r["request_latency_s"].items())
            console.print(f"[bold]{r['label']}[/bold] per request p50/p95/p99 (s, from submission): {parts}")
