"""Presents a results document: terminal table, results.json, outputs.json, PNG charts and a Markdown summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.floor import describe as describe_floor


def _num(v: float | None, fmt: str = ".1f") -> str:
    return "-" if v is None else format(v, fmt)


def _bytes(v: int | None) -> str:
    if v is None:
        return "-"
    return f"{v / 2**30:.2f} GiB" if v >= 2**30 else f"{v / 2**20:.0f} MiB"


def _lat(stats: dict[str, float] | None, q: str) -> str:
    return "-" if not stats else f"{stats[q]:.0f}"


def _ratio(row: dict[str, Any], base: str, key: str = "output_tokens_per_s") -> str:
    v = row.get("ratios", {}).get(f"vs_{base}", {}).get(key)
    if v is None:
        at_least = row.get("ratios_at_least", {}).get(f"vs_{base}", {}).get(key)
        return "-" if at_least is None else f">={at_least:.2f}x"
    return f"{v:.2f}x"


def _floor(row: dict[str, Any]) -> str:
    return "-" if row.get("floor_ratio") is None else f"{row['floor_ratio']:.2f}"


def _status_text(row: dict[str, Any]) -> str:
    if row["status"] == "ok":
        return "ok (reused)" if row.get("reused_from") else "ok"
    return f"{row['status']}: {(row.get('reason') or '').splitlines()[0][:60]}"


def _short_status(row: dict[str, Any]) -> str:
    return {"ok": "reused" if row.get("reused_from") else "ok", "not_available": "n/a"}.get(row["status"], row["status"])


def render_table(results: dict[str, Any], console: Console) -> None:
    t = Table(title=f"pipeline bench: {results['model']['name']} ({results['run']['dtype']}, {results['run']['device']}, "
                    f"{results['workload']['num_requests']} requests)", show_lines=False)
    for col in ("system", "status", "wall s", "req/s", "out tok/s", "total tok/s", "TTFT p50/p95/p99 ms",
                "TPOT p50/p95/p99 ms", "e2e p50/p95/p99 ms", "prefix hit", "preempt", "peak mem", "MFU",
                "x HF b4", "x HF CB", "x llama.cpp", "x floor"):
        t.add_column(col, justify="left" if col in ("system", "status") else "right", overflow="fold")
    for r in results["systems"]:
        ok = r["status"] == "ok"
        lat = lambda k: "/".join(_lat(r.get(k), q) for q in ("p50", "p95", "p99")) if ok else "-"  # noqa: E731
        hit = r.get("prefix_cache_hit_rate")
        t.add_row(
            r["label"], _short_status(r), _num(r.get("wall_s")), _num(r.get("requests_per_s"), ".2f"),
            _num(r.get("output_tokens_per_s")), _num(r.get("total_tokens_per_s")), lat("ttft_ms"), lat("tpot_ms"),
            lat("e2e_ms"), "-" if hit is None else f"{hit:.0%}", _num(r.get("preemptions"), "d"),
            _bytes(r.get("peak_device_bytes") or r.get("peak_rss_bytes")),
            "-" if r.get("mfu") is None else f"{r['mfu']:.1%}",
            _ratio(r, "hf_generate_b4"), _ratio(r, "hf_continuous_batching"), _ratio(r, "llamacpp"), _floor(r),
        )
    console.print(t)
    if results.get("floor"):
        console.print(describe_floor(results["floor"]))
    for r in results["systems"]:
        if r["status"] != "ok":
            console.print(f"  {r['label']}: {r['status']}: {(r.get('reason') or '').splitlines()[0]}")
    for r in results["systems"]:
        sp = r.get("speculative")
        if sp:
            console.print(f"  {r['label']}: {sp['accepted_tokens']} of {sp['draft_tokens']} drafts accepted "
                          f"({sp['acceptance_rate']:.1%}), {sp['mean_accepted_length']:.2f} per verify step; "
                          f"{sp['steps']} steps vs {sp['baseline_steps']} for {sp['baseline']} "
                          f"({sp['steps_saved_share']:.1%} saved), throughput x{sp['throughput_ratio'] or 0:.2f}"
                          + (f"; tokens identical to {sp['identical_outputs_vs']}: "
                             f"{sp['identical_outputs_share']:.0%}" if sp.get("identical_outputs_vs") else ""))
    g = results["gemm_peak"]
    console.print(f"MFU denominator: dense {g['dtype']} GEMM {g['flops_per_s'] / 1e9:.0f} GFLOP/s measured in this run; "
                  f"ratios are output tok/s over the baseline's.")


def _ok_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in results["systems"] if r["status"] == "ok"]


def write_charts(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """Throughput per system (baselines grey, ladder blue) and per-request latency distributions."""
    # lazy: only charts need it
    import matplotlib

    matplotlib.use("Agg")
    # lazy: only charts need it
    import matplotlib.pyplot as plt

    rows = _ok_rows(results)
    labels = [r["label"] for r in rows]
    colors = ["#8c8c8c" if r["kind"] == "baseline" else "#1f77b4" for r in rows]
    paths: list[Path] = []

    fig, axes = plt.subplots(1, 2, figsize=(13, 0.6 * max(len(rows), 2) + 1.8))
    for ax, key, title in ((axes[0], "output_tokens_per_s", "output tokens/s"),
                           (axes[1], "total_tokens_per_s", "total (prompt + output) tokens/s")):
        vals = [r[key] for r in rows]
        ax.barh(range(len(rows)), vals, color=colors)
        ax.set_yticks(range(len(rows)), labels)
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel("tokens/s")
        for i, (v, r) in enumerate(zip(vals, rows)):
            ratio = r.get("ratios", {}).get("vs_hf_generate_b4", {}).get(key)
            ax.text(v, i, f" {v:.3g}" + (f"  ({ratio:.1f}x HF b4)" if ratio else ""), va="center", fontsize=8)
        base = next((r[key] for r in rows if r["name"] == "hf_generate_b4"), None)
        if base:
            ax.axvline(base, color="#444444", linestyle="--", linewidth=1, label="HF generate batch 4")
            ax.legend(loc="lower right", fontsize=8)
        ax.margins(x=0.45)
    fig.suptitle(f"{results['model']['name']}, {results['workload']['num_requests']} requests, "
                 f"{results['run']['dtype']} on {results['run']['device']} ({results['machine']['torch_threads']} threads)")
    fig.tight_layout()
    p = out_dir / "throughput.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    fig, axes = plt.subplots(1, 3, figsize=(15, 0.55 * max(len(rows), 2) + 2.0), sharey=True)
    for ax, key, title in ((axes[0], "ttft_s", "time to first token"), (axes[1], "tpot_s", "time per output token"),
                           (axes[2], "e2e_s", "end-to-end latency")):
        data = [[v * 1e3 for v in (r.get("per_request") or {}).get(key, []) if v is not None] or [float("nan")]
                for r in rows]
        ax.boxplot(data, orientation="horizontal", whis=(1, 99), showfliers=True)
        ax.set_yticks(range(1, len(rows) + 1), labels)
        ax.set_xscale("log")
        ax.set_xlabel("ms (log scale; whiskers P1-P99)")
        ax.set_title(title)
    axes[0].invert_yaxis()
    fig.tight_layout()
    p = out_dir / "latency.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    return paths


def markdown_summary(results: dict[str, Any]) -> str:
    """The README results section: reproduce command, machine, headline ratios, ladder table, MFU."""
    m, w, g = results["machine"], results["workload"], results["gemm_peak"]
    lines = [
        f"Command: `{results.get('command') or 'pipeline bench'}`",
        "",
        f"Machine: {m['cpu_model']}, {m['torch_threads']} torch threads on {m['usable_cores']} usable cores"
        + (f", {m['gpu_name']}" if m.get("gpu_name") else "")
        + f"; torch {m['torch']}, transformers {m['transformers']}. Dense {g['dtype']} GEMM peak measured in the run: "
        f"{g['flops_per_s'] / 1e9:.0f} GFLOP/s.",
        f"Model: `{results['model']['name']}` ({'random weights' if results['model']['random_weights'] else 'checkpoint'},"
        f" {results['model']['num_params'] / 1e6:.0f}M params), {results['run']['dtype']} on {results['run']['device']}. "
        f"Workload: {w['num_requests']} requests at t=0, {w['prefix_len']}-token shared prefix, prompts "
        f"{w['prompt_len_min']}-{w['prompt_len_max']} tokens (median {w['prompt_len_median']}), outputs "
        f"{w['output_len_min']}-{w['output_len_max']} tokens, seed {w['seed']}, fingerprint `{w['fingerprint']}`.",
        "",
    ]
    h = results.get("headline", {})
    if h.get("best_engine_step"):
        parts = [f"Best engine step: **{h['best_engine_label']}** at {h['output_tokens_per_s']:.1f} output tok/s"]
        for base, name in (("hf_generate_b4", "HF `generate` batch 4"), ("hf_continuous_batching", "HF continuous batching")):
            r = h.get(f"ratio_vs_{base}")
            low = h.get(f"ratio_at_least_vs_{base}")
            if r:
                parts.append(f"**{r['output_tokens_per_s']:.1f}x** {name} (output tok/s; "
                             f"{r['total_tokens_per_s']:.1f}x total tok/s)")
            elif low:
                parts.append(f"**at least {low['output_tokens_per_s']:.1f}x** {name} (stopped at the time limit "
                             "before finishing; the bound assumes it would have finished right then)")
        if h.get("mfu") is not None:
            parts.append(f"MFU {h['mfu']:.1%}")
        lines += ["; ".join(parts) + ".", ""]
    lines += [
        "| system | status | wall s | out tok/s | total tok/s | TTFT p50/p99 ms | TPOT p50/p99 ms | e2e p50/p99 ms "
        "| prefix hit | preempt | peak mem | MFU | x HF b4 | x HF CB | x llama.cpp | x floor |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results["systems"]:
        ok = r["status"] == "ok"
        lat = lambda k: f"{_lat(r.get(k), 'p50')} / {_lat(r.get(k), 'p99')}" if ok else "-"  # noqa: E731
        hit = r.get("prefix_cache_hit_rate")
        mfu = "-" if r.get("mfu") is None else f"{r['mfu']:.1%}"
        lines.append(
            f"| {r['label']} | {_status_text(r).replace('|', '/')} | {_num(r.get('wall_s'))} | "
            f"{_num(r.get('output_tokens_per_s'))} | {_num(r.get('total_tokens_per_s'))} | {lat('ttft_ms')} | "
            f"{lat('tpot_ms')} | {lat('e2e_ms')} | {'-' if hit is None else f'{hit:.0%}'} | "
            f"{_num(r.get('preemptions'), 'd')} | {_bytes(r.get('peak_device_bytes') or r.get('peak_rss_bytes'))} | "
            f"{mfu} | "
            f"{_ratio(r, 'hf_generate_b4')} | {_ratio(r, 'hf_continuous_batching')} | {_ratio(r, 'llamacpp')} | "
            f"{_floor(r)} |"
        )
    lines += ["", "MFU: " + results["mfu_definition"] + ".", ""]
    if results.get("floor"):
        lines += ["x floor: wall time over the " + describe_floor(results["floor"]) + ".", ""]
    return "\n".join(lines)


def write_outputs(results: dict[str, Any], tokens: dict[str, list[list[int]]], out_dir: Path) -> dict[str, Path]:
    """Write results.json, outputs.json (greedy token ids per system), charts and results.md into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    charts = write_charts(results, out_dir)
    results["charts"] = [p.name for p in charts]
    paths = {"results": out_dir / "results.json", "outputs": out_dir / "outputs.json", "markdown": out_dir / "results.md"}
    paths["results"].write_text(json.dumps(results, indent=1))
    paths["outputs"].write_text(json.dumps(tokens))
    paths["markdown"].write_text(markdown_summary(results))
    for p in charts:
        paths[p.stem] = p
    return paths
