"""Native CPU kernels, compiled from C++ on first use with torch's extension builder (gcc/clang + ninja).

They exist where plain torch ops measurably fall short on CPU: decode attention has to read every cached key and
value of every running sequence, and gathering those through the block table into a dense copy first cost
several times the attention itself; the int8 linear was ten eager passes around oneDNN's GEMM, which re-lays its
weight out on every call (now one call over a weight packed at load, with AVX512-VNNI), and the layer's
elementwise steps (bf16/fp16) were several eager passes each, now one (all bit-identical to the torch reference). When no compiler is
available the build fails once, a warning says why, and callers fall back to the torch reference kernels
(`native_ops()` returns None).
"""

from __future__ import annotations

from kernels.cpu.build import native_ops

__all__ = ["native_ops"]
