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
#endif
  for (int64_t k = k1; k < cols; ++k) dst[k] = static_cast<int8_t>(std::nearbyint(tmp[k] / s));
  return s;
}

}  // namespace finllm_int8
