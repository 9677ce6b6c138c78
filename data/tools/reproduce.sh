#!/usr/bin/env bash
# Rebuild the demo model from scratch, seeded: corpus -> tokenizer -> training (CPU, ~1 h on 2 cores).
# Usage: bash data/tools/reproduce.sh [OUT_DIR]   (default data/models/finextract-3m)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-data/models/finextract-3m}"
THREADS="${THREADS:-1}"  # 1 is fastest on a shared 2-core box; 2 on an idle one
python data/tools/build_dataset.py --seed 1 --docs 8000 --accounts 1200 --out data/build/train.jsonl
python data/tools/build_dataset.py --seed 5 --docs 150 --accounts 20 --out data/build/dev.jsonl
python data/tools/train_tokenizer.py --corpus data/build/train.jsonl --out "$OUT"
python data/tools/train_model.py --train data/build/train.jsonl --dev data/build/dev.jsonl --out "$OUT" \
    --steps 1800 --threads "$THREADS"
