#!/usr/bin/env bash
# The GPU path in one run (under 10 minutes on one datacenter GPU), for a session that is lent one:
#   1. every Triton kernel test natively on the GPU (tests/test_triton*.py pick CUDA when it is there; the bf16
#      cases that Triton's CPU interpreter cannot run are included),
#   2. engine token parity with Hugging Face in float32 on CUDA (tests/test_engine_parity.py: the engine's
#      device "auto" is CUDA there, so every op runs on the Triton kernels) and the Triton-kernel engine test,
#   3. the standard workload (shared GUIDE section 3) against HF generate batch 4, bf16 on CUDA,
#   4. decode CUDA graphs: their tests, and the real model with graphs vs eager (scripts/cuda_graph_check.py).
# Results land in ${OUT:-gpu-check-out}: pytest logs, the bench's results.json/results.md, nvidia-smi.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-check-out}"
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || { echo "no GPU: nvidia-smi failed" >&2; exit 2; }
[ -x .venv/bin/python ] || bash scripts/setup.sh
PY=.venv/bin/python
$PY -c "import torch, triton; assert torch.cuda.is_available(), 'torch has no CUDA'; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" | tee "$OUT/versions.txt"
timeout 240 $PY -m pytest -q tests/test_triton_kernels.py tests/test_triton_int8.py 2>&1 | tee "$OUT/kernels.txt" | tail -3
timeout 120 $PY -m pytest -q tests/test_engine_parity.py -k "greedy_matches_hf" 2>&1 | tee "$OUT/parity.txt" | tail -3
timeout 240 $PY -m bench --device cuda --dtype bfloat16 --systems hf_generate_b4,engine_prefix_cache,engine_compiled \
  --out "$OUT/bench" 2>&1 | tee "$OUT/bench.txt" | tail -15
# 4. decode CUDA graphs: the test file natively, then the real model with graphs vs eager (tokens equal, timings)
timeout 120 $PY -m pytest -q tests/test_decode_graphs.py 2>&1 | tee "$OUT/decode_graphs.txt" | tail -3
SMOL="$($PY -c 'from pipeline.models import resolve_model; print(resolve_model("smollm2-135m-instruct"))' 2>/dev/null || true)"
[ -n "$SMOL" ] && timeout 180 $PY scripts/cuda_graph_check.py --model "$SMOL" 2>&1 | tee "$OUT/cuda_graphs.txt" | tail -20
