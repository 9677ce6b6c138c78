// The AVX2 path of paged decode attention (paged_decode.cpp includes this where AVX2 + FMA are present and
// AVX-512 is not): the same three passes as the AVX-512 path — scores q . k through the block table, exp(s - max)
// with a vector polynomial, then the weighted sum of value rows — in 8-lane vectors.
//
// Why: the portable loops it replaces (per key: copy the row, one dot product per query head with its own
// horizontal sum, a scalar exp per score) ran at ~3-6 GB/s of KV on a 2-core AVX2 EPYC, where one decode layer of
// the standard benchmark (64 rows x ~1000 keys, float32 KV) reads ~100 MB: 16-30 ms per layer, the largest cost
// of the int8 rung there.
//
// Key pass: keys in groups of 4 within a block; for each query head, four accumulators over the row's 8-lane
// chunks, reduced together by two hadds (one horizontal reduction per 4 scores). Value pass: query heads in tiles
// of 3 and head_dim in chunks of 4 vectors, so 12 accumulators stay in registers; each tile walks the keys once.
#pragma once

#include "simd.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace finllm_decode_avx2 {

using finllm_simd::load8;  // float, bfloat16 and half rows

inline __m256 load8(const int8_t* p) {  // int8 cache rows (their scale is applied to the dot product)
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

template <typename T>
constexpr bool kLoads = std::is_same_v<T, float> || std::is_same_v<T, int8_t> || std::is_same_v<T, c10::BFloat16> ||
                        std::is_same_v<T, c10::Half>;

// exp(x) for x <= 0: 2^n * p(r), r = x - n ln2 in [-ln2/2, ln2/2], degree-6 polynomial (relative error ~2e-7);
// 2^n built in the exponent bits; 0 below -87.
inline __m256 exp_nonpos(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));  // n >= -126 here: a normal power of two
  return _mm256_andnot_ps(tiny, e);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(_mm_hadd_ps(s, s));
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

// [sum(a), sum(b), sum(c), sum(d)]
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // per 128-bit half: [a, b, c, d] partial sums
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

template <typename cache_t>
inline float row_scale(const cache_t* row, int64_t dim) {
  if constexpr (std::is_same_v<cache_t, int8_t>) {
    float s;
    std::memcpy(&s, row + dim, sizeof(float));
    return s;
  } else {
    return 1.f;
  }
}

inline void prefetch_rows(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 3);
}

// One (sequence, KV head) item. q: [group, dim] float32, already scaled; scores: [group, n] scratch; out_f:
// [group, dim]. dim % 8 == 0. Keys [lo, len) of the head's rows (stride values apart) through `table`.
constexpr int64_t kAhead = 2;  // blocks prefetched ahead of the one being read

template <typename cache_t>
void decode_item(const float* q, const cache_t* k_head, const cache_t* v_head, const int64_t* table, int64_t lo,
                 int64_t len, int64_t block_size, int64_t stride, int64_t dim, int64_t group, float* scores,
                 float* out_f) {
  const int64_t n = len - lo, chunks = dim / 8;
  const int64_t block_bytes = block_size * stride * static_cast<int64_t>(sizeof(cache_t));
  const int64_t first = lo / block_size;
  for (int64_t a = 1; a < kAhead && (first + a) * block_size < len; ++a)  // the blocks the loop's own prefetch skips
    prefetch_rows(k_head + table[first + a] * block_size * stride, block_bytes);
  for (int64_t b = lo / block_size, t = lo; t < len; ++b) {
    const int64_t off = t - b * block_size, stop = std::min(len, (b + 1) * block_size);
    const cache_t* rows = k_head + (table[b] * block_size + off) * stride;
    if ((b + kAhead) * block_size < len) prefetch_rows(k_head + table[b + kAhead] * block_size * stride, block_bytes);
    for (; t + 4 <= stop; t += 4, rows += 4 * stride) {
      __m128 ks = _mm_setr_ps(row_scale(rows, dim), row_scale(rows + stride, dim), row_scale(rows + 2 * stride, dim),
                              row_scale(rows + 3 * stride, dim));
      for (int64_t g = 0; g < group; ++g) {
        const float* qg = q + g * dim;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t c = 0; c < chunks; ++c) {
          const __m256 qc = _mm256_loadu_ps(qg + 8 * c);
          a0 = _mm256_fmadd_ps(qc, load8(rows + 8 * c), a0);
          a1 = _mm256_fmadd_ps(qc, load8(rows + stride + 8 * c), a1);
          a2 = _mm256_fmadd_ps(qc, load8(rows + 2 * stride + 8 * c), a2);
          a3 = _mm256_fmadd_ps(qc, load8(rows + 3 * stride + 8 * c), a3);
        }
        _mm_storeu_ps(scores + g * n + (t - lo), _mm_mul_ps(hsum4(a0, a1, a2, a3), ks));
      }
    }
    for (; t < stop; ++t, rows += stride) {
      const float ks = row_scale(rows, dim);
      for (int64_t g = 0; g < group; ++g) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t c = 0; c < chunks; ++c) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * dim + 8 * c), load8(rows + 8 * c), a);
        scores[g * n + (t - lo)] = hsum(a) * ks;
      }
    }
  }

  float inv_sum[64];
  for (int64_t g = 0; g < group; ++g) {
    float* s = scores + g * n;
    __m256 mv = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + i));
    float mx = hmax(mv);
    for (; i < n; ++i) mx = std::max(mx, s[i]);
    const __m256 mx_v = _mm256_set1_ps(mx);
    __m256 sum_v = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
      const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(s + i), mx_v));
      _mm256_storeu_ps(s + i, e);
      sum_v = _mm256_add_ps(sum_v, e);
    }
    if (i < n) {  // the tail through a padded buffer (-inf scores: exp gives 0)
      alignas(32) float tail[8];
      std::fill(tail, tail + 8, -std::numeric_limits<float>::infinity());
      std::memcpy(tail, s + i, (n - i) * sizeof(float));
      const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_load_ps(tail), mx_v));
      _mm256_store_ps(tail, e);
      std::memcpy(s + i, tail, (n - i) * sizeof(float));
      sum_v = _mm256_add_ps(sum_v, e);
    }
    inv_sum[g] = 1.f / hsum(sum_v);
  }

  constexpr int TILE = 3, CB = 4;  // 12 accumulators
  for (int64_t g0 = 0; g0 < group; g0 += TILE) {
    const int64_t tile = std::min<int64_t>(TILE, group - g0);
    for (int64_t c0 = 0; c0 < chunks; c0 += CB) {
      const int64_t cb = std::min<int64_t>(CB, chunks - c0);
      __m256 acc[TILE][CB];
      for (int g = 0; g < TILE; ++g)
        for (int c = 0; c < CB; ++c) acc[g][c] = _mm256_setzero_ps();
      for (int64_t a = 1; a < kAhead && (first + a) * block_size < len; ++a)
        prefetch_rows(v_head + table[first + a] * block_size * stride, block_bytes);
      for (int64_t b = lo / block_size, t = lo; t < len; ++b) {
        const int64_t off = t - b * block_size, stop = std::min(len, (b + 1) * block_size);
        const cache_t* row = v_head + (table[b] * block_size + off) * stride;
        if ((b + kAhead) * block_size < len)
          prefetch_rows(v_head + table[b + kAhead] * block_size * stride, block_bytes);
        for (; t < stop; ++t, row += stride) {
          const float vs = row_scale(row, dim);
          __m256 vv[CB];
          for (int c = 0; c < CB; ++c) vv[c] = c < cb ? load8(row + 8 * (c0 + c)) : _mm256_setzero_ps();
          for (int g = 0; g < TILE; ++g) {
            if (g >= tile) break;
            const __m256 p = _mm256_set1_ps(scores[(g0 + g) * n + (t - lo)] * vs);
            for (int c = 0; c < CB; ++c) acc[g][c] = _mm256_fmadd_ps(p, vv[c], acc[g][c]);
          }
        }
      }
      for (int g = 0; g < TILE; ++g) {
        if (g >= tile) break;
        const __m256 inv = _mm256_set1_ps(inv_sum[g0 + g]);
        for (int c = 0; c < CB; ++c)
          if (c < cb) _mm256_storeu_ps(out_f + (g0 + g) * dim + 8 * (c0 + c), _mm256_mul_ps(acc[g][c], inv));
      }
    }
  }
}

}  // namespace finllm_decode_avx2
