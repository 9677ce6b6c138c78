#!/usr/bin/env bash
# Rebuild the demo model from scratch, seeded: corpus -> tokenizer -> training (CPU; ~1 h on this idle 2-core box).
# Usage: bash data/tools/reproduce.sh [OUT_DIR]   (default data/models/finextract-3m)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-data/models/finextract-3m}"
THREADS="${THREADS:-2}"  # 2 on an idle 2-core box; 1 if other jobs share the cores (see data/README.md)
python data/tools/build_dataset.py --seed 1 --docs 8000 --accounts 1200 --out data/build/train.jsonl
python data/tools/build_dataset.py --seed 5 --docs 150 --accounts 20 --out data/build/dev.jsonl
python data/tools/train_tokenizer.py --corpus data/build/train.jsonl --out "$OUT"
python data/tools/train_model.py --train data/build/train.jsonl --dev data/build/dev.jsonl --out "$OUT" \
    --copy-init --snippet-steps 1200 --steps 6000 --lr 1.5e-3 --eval-every 1000 --threads "$THREADS"
