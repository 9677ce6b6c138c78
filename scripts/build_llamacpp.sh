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
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF > "$work/cmake.log"
cmake --build "$work/build" -j "$(nproc)" --target llama-batched-bench llama-quantize llama-server
cp "$work/build/bin/llama-batched-bench" "$work/build/bin/llama-quantize" "$work/build/bin/llama-server" "$prefix/bin/"
echo "llama.cpp tools in $prefix/bin"
