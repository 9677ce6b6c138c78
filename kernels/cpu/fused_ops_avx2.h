// The decoder layer's elementwise steps for float32 activations on AVX2 CPUs without AVX-512 (fused_ops.cpp
// includes this there): add + RMSNorm, SiLU x up and the rotary embedding, each one pass over the rows.
//
// Why: float32 is the dtype on CPUs without a bf16 path, and there eager torch ran these as 3-7 ops each, every
// one a full pass over the activations plus a dispatch (~8% of the standard workload on a 2-core AVX2 EPYC).
// They must stay bit-identical to kernels/reference (the exact-parity contract with Hugging Face float32), so
// each does the reference's float operations in its order: torch's sum order for the variance
// (torch_row_sum.h), the same exp torch's AVX2 SiLU calls (Sleef_expf8_u10, exported by libtorch_cpu) on the
// same 16-element chunks with std::exp on the row tail, and no fused multiply-adds (-ffp-contract=off).
#pragma once

#include "torch_row_sum.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <vector>

extern "C" __m256 Sleef_expf8_u10(__m256);

namespace finllm_fused_avx2 {

// out = weight * (h * rsqrt(mean(h^2) + eps)) with h = x + residual (written to res_out when residual is given).
inline void add_rms_norm_rows(const float* x, const float* res, const float* w, float* out, float* res_out,
                              int64_t rows, int64_t dim, float eps) {
  const int64_t vec_end = dim - dim % 8;
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> sq(dim);
    for (int64_t r = begin; r < end; ++r) {
      const float* h = x + r * dim;
      if (res != nullptr) {  // the reference's eager x + residual, kept as the next residual
        float* ho = res_out + r * dim;
        const float* rr = res + r * dim;
        int64_t d = 0;
        for (; d < vec_end; d += 8) _mm256_storeu_ps(ho + d, _mm256_add_ps(_mm256_loadu_ps(h + d), _mm256_loadu_ps(rr + d)));
        for (; d < dim; ++d) ho[d] = h[d] + rr[d];
        h = ho;
      }
      for (int64_t d = 0; d < dim; ++d) sq[d] = h[d] * h[d];
      const float var = finllm_sum::torch_row_sum(sq.data(), dim) / static_cast<float>(dim);
      const float rs = 1.f / std::sqrt(var + eps);
      const __m256 rs_v = _mm256_set1_ps(rs);
      float* o = out + r * dim;
      int64_t d = 0;
      for (; d < vec_end; d += 8)
        _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(w + d), _mm256_mul_ps(_mm256_loadu_ps(h + d), rs_v)));
      for (; d < dim; ++d) o[d] = w[d] * (h[d] * rs);
    }
  });
}

// out = gate / (1 + exp(-gate)) * up over rows of [gate | up].
inline void silu_mul_rows(const float* x, float* out, int64_t rows, int64_t inter) {
  const int64_t vec_end = inter - inter % 16;
  at::parallel_for(0, rows, 8, [&](int64_t begin, int64_t end) {
    const __m256 one = _mm256_set1_ps(1.f), sign = _mm256_set1_ps(-0.f);
    for (int64_t r = begin; r < end; ++r) {
      const float* g = x + r * 2 * inter;
      const float* u = g + inter;
      float* o = out + r * inter;
      int64_t d = 0;
      for (; d < vec_end; d += 8) {
        const __m256 gv = _mm256_loadu_ps(g + d);
        const __m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, Sleef_expf8_u10(_mm256_xor_ps(gv, sign))));
        _mm256_storeu_ps(o + d, _mm256_mul_ps(s, _mm256_loadu_ps(u + d)));
      }
      for (; d < inter; ++d) o[d] = g[d] / (1.0f + std::exp(-g[d])) * u[d];
    }
  });
}

// out = x * cos + rotate_half(x) * sin, rotate_half(x) = [-x_hi, x_lo]; x rows may be strided (fused QKV columns).
inline void rotary_rows(const float* x, int64_t row_stride, int64_t heads, int64_t dim, const float* cos,
                        const float* sin, float* out, int64_t rows) {
  const int64_t half = dim / 2, vec_end = half - half % 8;
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    const __m256 sign = _mm256_set1_ps(-0.f);
    for (int64_t r = begin; r < end; ++r) {
      const float* c = cos + r * dim;
      const float* s = sin + r * dim;
      for (int64_t h = 0; h < heads; ++h) {
        const float* xr = x + r * row_stride + h * dim;
        float* o = out + (r * heads + h) * dim;
        int64_t d = 0;
        for (; d < vec_end; d += 8) {
          const __m256 lo = _mm256_loadu_ps(xr + d), hi = _mm256_loadu_ps(xr + half + d);
          const __m256 lo_out = _mm256_add_ps(_mm256_mul_ps(lo, _mm256_loadu_ps(c + d)),
                                              _mm256_mul_ps(_mm256_xor_ps(hi, sign), _mm256_loadu_ps(s + d)));
          const __m256 hi_out = _mm256_add_ps(_mm256_mul_ps(hi, _mm256_loadu_ps(c + half + d)),
                                              _mm256_mul_ps(lo, _mm256_loadu_ps(s + half + d)));
          _mm256_storeu_ps(o + d, lo_out);
          _mm256_storeu_ps(o + half + d, hi_out);
        }
        for (; d < half; ++d) {
          o[d] = xr[d] * c[d] + (-xr[half + d]) * s[d];
          o[half + d] = xr[half + d] * c[half + d] + xr[d] * s[half + d];
        }
      }
    }
  });
}

}  // namespace finllm_fused_avx2
