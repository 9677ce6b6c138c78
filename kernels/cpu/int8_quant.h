// One row's symmetric int8 quantization, shared by the W8A8 activations (int8_rows.cpp) and the int8 KV cache
// (kv_store.cpp): scale = max(amax, 1e-10) / 127, q = round-half-even(x / scale). The same float operations as
// kernels/reference/int8_gemm.quantize_activation, so both give the reference's bits.
#pragma once

#include "simd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace finllm_int8 {

constexpr float kQmax = 127.f;
constexpr float kMinAmax = 1e-10f;  // matches _MIN_AMAX in the reference

template <typename T>
constexpr bool kVec = std::is_same_v<T, float> || std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;

#ifdef FINLLM_SIMD_AVX2
#define FINLLM_INT8_QUANT_AVX2 1
using finllm_simd::load8;
#endif

// src: cols values; tmp: cols floats of scratch; dst: cols int8. Returns the row's scale.
template <typename scalar_t>
inline float quantize_row(const scalar_t* src, int64_t cols, float* tmp, int8_t* dst) {
  float amax = 0.f;
  int64_t k0 = 0;
#ifdef FINLLM_SIMD_AVX512
  if constexpr (kVec<scalar_t>) {
    __m512 vmax = _mm512_setzero_ps();
    for (; k0 + 16 <= cols; k0 += 16) {
      const __m512 v = finllm_simd::load16(src + k0);
      _mm512_storeu_ps(tmp + k0, v);
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(v));
    }
    amax = _mm512_reduce_max_ps(vmax);
  }
#elif defined(FINLLM_INT8_QUANT_AVX2)
  if constexpr (kVec<scalar_t>) {
    // max(|v|, acc) keeps acc where v is NaN, as the scalar std::max(amax, |v|) below does
    const __m256 sign = _mm256_set1_ps(-0.f);
    __m256 vmax = _mm256_setzero_ps();
    for (; k0 + 8 <= cols; k0 += 8) {
      const __m256 v = load8(src + k0);
      _mm256_storeu_ps(tmp + k0, v);
      vmax = _mm256_max_ps(_mm256_andnot_ps(sign, v), vmax);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vmax);
    for (float l : lanes) amax = std::max(amax, l);
  }
#endif
  for (int64_t k = k0; k < cols; ++k) {
    tmp[k] = static_cast<float>(src[k]);
    amax = std::max(amax, std::fabs(tmp[k]));
  }
  const float s = std::max(amax, kMinAmax) / kQmax;
  int64_t k1 = 0;
#ifdef FINLLM_SIMD_AVX512
  const __m512 sv = _mm512_set1_ps(s);
  for (; k1 + 16 <= cols; k1 += 16) {
    const __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(tmp + k1), sv),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k1), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(r)));
  }
#elif defined(FINLLM_INT8_QUANT_AVX2)
  // the scalar loop's IEEE division and round-half-even, 8 lanes at a time; |q| <= 127, so the packs never clip
  const __m256 sv = _mm256_set1_ps(s);
  for (; k1 + 8 <= cols; k1 += 8) {
    const __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(tmp + k1), sv),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i i32 = _mm256_cvtps_epi32(r);
    const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + k1), _mm_packs_epi16(i16, i16));
  }
#endif
  for (int64_t k = k1; k < cols; ++k) dst[k] = static_cast<int8_t>(std::nearbyint(tmp[k] / s));
  return s;
}

}  // namespace finllm_int8
