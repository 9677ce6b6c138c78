// Float32 loads (and on AVX-512 stores) of the activation dtypes, shared by the CPU kernels' vector paths: 16 lanes
// on AVX-512, 8 lanes on AVX2-only CPUs (the same widening, so the same values).
//
// Stores round like c10's scalar conversions (round half to even; NaN -> quiet NaN), so a kernel that does the
// reference's float operations in the reference's order produces the same bits.
#pragma once

#include <torch/extension.h>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define FINLLM_SIMD_AVX512 1

namespace finllm_simd {

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const c10::BFloat16* p) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}
inline __m512 load16(const c10::Half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
inline void store16(c10::Half* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Masked forms for row tails: lanes outside `m` read as 0 and are not written.
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const c10::BFloat16* p, __mmask16 m) {
  const __m256i raw = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}
inline __m512 load16(const c10::Half* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

inline __m256i bf16_bits(__m512 v) {  // round half to even, NaN -> 0x7fc0: c10's float -> bfloat16
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}
inline void store16(c10::BFloat16* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_bits(v));
}
inline void store16(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
inline void store16(c10::BFloat16* p, __m512 v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, bf16_bits(v)); }
inline void store16(c10::Half* p, __m512 v, __mmask16 m) {
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// v rounded to T and widened back: the float value a T tensor would hold.
inline __m512 round_to(float*, __m512 v) { return v; }
inline __m512 round_to(c10::BFloat16*, __m512 v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16_bits(v)), 16));
}
inline __m512 round_to(c10::Half*, __m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1); }

// Horizontal sum in the order torch's vec_reduce_all uses on AVX-512 (halves, quarters, pairs, neighbours).
inline float reduce_add_like_torch(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
  v = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, 0xB1));
  return _mm512_cvtss_f32(v);
}

}  // namespace finllm_simd

// torch's own vectorised exp (exported by libtorch_cpu, which the extension links): the same function its
// softmax and SiLU kernels call, so results match theirs bit for bit.
extern "C" __m512 Sleef_expf16_u10(__m512);

#endif

#if !defined(FINLLM_SIMD_AVX512) && defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define FINLLM_SIMD_AVX2 1

namespace finllm_simd {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const c10::BFloat16* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}
inline __m256 load8(const c10::Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

}  // namespace finllm_simd

#endif
