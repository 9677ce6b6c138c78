#!/usr/bin/env bash
# Build llama.cpp's batched benchmark, quantizer and HTTP server from the llama.cpp vendored in the
# llama-cpp-python sdist on PyPI (the registry this machine reaches; no git clone needed).
# The bench's optional `llamacpp` peer uses the result; CI does not run this.
#
#   bash scripts/build_llamacpp.sh [PREFIX]      # default PREFIX: .llamacpp/
#   then: pipeline bench --peer-llamacpp PREFIX/bin ...   (or put PREFIX/bin on PATH)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:-$here/.llamacpp}"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
work="$prefix/src"
mkdir -p "$work" "$prefix/bin"
if [ ! -d "$work/llama_cpp_python-$version" ]; then
    python -m pip download "llama-cpp-python==$version" --no-binary llama-cpp-python --no-deps -d "$work"
    tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
fi
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
# Native CPU build (GGML_NATIVE picks up AVX512/VNNI/BF16 where the CPU has them), no GPU, no curl.
# LLAMACPP_CMAKE_ARGS adds or overrides flags: on a VM that reports AMX but faults on it (SIGILL as a Q8_0 model
# loads), "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON
# -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON" builds the same kernels without AMX.
# shellcheck disable=SC2086
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON ${LLAMACPP_CMAKE_ARGS:-} \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF > "$work/cmake.log"
cmake --build "$work/build" -j "$(nproc)" --target llama-batched-bench llama-quantize llama-server
cp "$work/build/bin/llama-batched-bench" "$work/build/bin/llama-quantize" "$work/build/bin/llama-server" "$prefix/bin/"
# convert_hf_to_gguf.py (the real workload's peer GGUF) imports sentencepiece before it reads a BPE tokenizer.json
python -c "import sentencepiece" 2>/dev/null || python -m pip install -q sentencepiece
echo "llama.cpp tools in $prefix/bin"
