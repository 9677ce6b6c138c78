"""The llama.cpp peer: the CPU engine a user would pick instead of ours, on the same weights and workload shape.

It runs llama.cpp's own batched benchmark (`llama-batched-bench`, built by scripts/build_llamacpp.sh from the
llama.cpp vendored in the llama-cpp-python sdist) once per GGUF file and parallel setting, and keeps each file's
best setting. That tool serves P identical-length sequences at once (prompt processing, then generation), so
the peer needs a uniform workload without a shared prefix (prompt and output lengths equal across requests); N
requests take ceil(N / P) such batches. Its prompts are its own tokens, not the workload's, so its outputs are
not compared.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.results import SystemResult, empty_row
from bench.workload import Workload

BINARY = "llama-batched-bench"
QUANTIZER = "llama-quantize"
DEFAULT_BIN_DIR = Path(__file__).resolve().parents[1] / ".llamacpp" / "bin"
PEER_FORMATS = ("Q8_0", "BF16")


@dataclass(frozen=True)
class BatchedBenchRow:
    prompt_tokens: int
    output_tokens: int
    parallel: int
    prompt_s: float
    generate_s: float
    total_s: float


def find_tool(name: str, bin_dir: Path | None) -> Path | None:
    """`name` in bin_dir, else the project's .llamacpp/bin, else PATH."""
    for d in (bin_dir, DEFAULT_BIN_DIR):
        if d is not None and (Path(d) / name).is_file():
            return Path(d) / name
    found = shutil.which(name)
    return Path(found) if found else None


def parse_batched_bench(text: str) -> list[BatchedBenchRow]:
    """Rows of llama-batched-bench's markdown table: | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s |
    T s | S t/s |."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 10 or not cells[0].isdigit():
            continue
        pp, tg, b = int(cells[0]), int(cells[1]), int(cells[2])
        rows.append(BatchedBenchRow(pp, tg, b, float(cells[4]), float(cells[6]), float(cells[8])))
    return rows


def uniform_shape(workload: Workload) -> tuple[int, int] | str:
    """(prompt tokens, output tokens) of a uniform workload, or why this one is not."""
    prompts = {len(r.prompt_token_ids) for r in workload.requests}
    outputs = {r.output_len for r in workload.requests}
    if len(prompts) != 1 or len(outputs) != 1 or workload.spec.prefix_len:
        return ("llama-batched-bench serves equal-length prompts without a shared prefix: run a uniform workload, "
                "e.g. --prefix-len 0 --body-sigma 0 --body-median 754 --output-min 161 --output-max 161")
    return prompts.pop(), outputs.pop()


def peer_ggufs(model_gguf: Path | None, explicit: tuple[Path, ...], out_dir: Path, bin_dir: Path | None) -> list[Path] | str:
    """The GGUF files to run: those given, else the benchmarked model's own GGUF converted to Q8_0 and BF16 with
    llama-quantize (the same weights the engine loads), else why there are none."""
    if explicit:
        missing = [str(p) for p in explicit if not Path(p).is_file()]
        return f"GGUF not found: {', '.join(missing)}" if missing else [Path(p) for p in explicit]
    if model_gguf is None:
        return "needs GGUF weights: --llamacpp-gguf FILE, or --model naming a .gguf (then Q8_0 and BF16 are made)"
    quantize = find_tool(QUANTIZER, bin_dir)
    if quantize is None:
        return f"{QUANTIZER} not found (bash scripts/build_llamacpp.sh)"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for fmt in PEER_FORMATS:
        target = out_dir / f"{model_gguf.stem}.{fmt}.gguf"
        if not target.exists():
            subprocess.run([str(quantize), "--allow-requantize", str(model_gguf), str(target), fmt],
                           check=True, capture_output=True)
        files.append(target)
    return files


def run_peer(gguf: Path, workload: Workload, threads: int, parallel: tuple[int, ...], bin_dir: Path | None,
             log_path: Path, timeout_s: float | None = None) -> SystemResult:
    """One row for one GGUF file: its best parallel setting over the whole workload."""
    fmt = gguf.stem.rsplit(".", 1)[-1]  # "model.Q8_0" -> "Q8_0"
    name, label = f"llamacpp_{fmt.lower()}", f"llama.cpp {fmt} (llama-batched-bench)"
    binary = find_tool(BINARY, bin_dir)
    shape = uniform_shape(workload)
    if binary is None:
        return _row(empty_row(name, "not_available", f"{BINARY} not found (bash scripts/build_llamacpp.sh)"), label)
    if isinstance(shape, str):
        return _row(empty_row(name, "not_available", shape), label)
    pp, tg = shape
    n = len(workload.requests)
    tried: list[tuple[int, float]] = []
    with open(log_path, "w") as log:
        for p in sorted({min(p, n) for p in parallel}):
            cmd = [str(binary), "-m", str(gguf), "-c", str(p * (pp + tg)), "-npp", str(pp), "-ntg", str(tg),
                   "-npl", str(p), "-t", str(threads)]
            log.write(" ".join(cmd) + "\n")
            log.flush()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                log.write(f"stopped after {timeout_s} s\n")
                continue
            log.write(proc.stdout + proc.stderr)
            rows = parse_batched_bench(proc.stdout)
            if proc.returncode == 0 and rows:
                tried.append((p, math.ceil(n / p) * rows[-1].total_s))
    if not tried:
        return _row(empty_row(name, "error", f"no llama-batched-bench result; see {log_path}"), label)
    best_p, wall = min(tried, key=lambda t: t[1])
    prompt, output = pp * n, tg * n
    return SystemResult(
        name=name, label=label, kind="peer", status="ok", wall_s=wall, num_requests=n, prompt_tokens=prompt,
        output_tokens=output, requests_per_s=n / wall, output_tokens_per_s=output / wall,
        total_tokens_per_s=(prompt + output) / wall,
        config={"gguf": str(gguf), "parallel": best_p, "threads": threads,
                "wall_s_by_parallel": {str(p): w for p, w in tried}},
        notes=[f"best of -npl {', '.join(str(p) for p, _ in tried)}: {best_p} sequences at a time, "
               f"{math.ceil(n / best_p)} batch(es); its prompts are its own tokens of the same lengths"],
    )


def _row(row: SystemResult, label: str) -> SystemResult:
    return row.model_copy(update={"label": label, "kind": "peer"})
