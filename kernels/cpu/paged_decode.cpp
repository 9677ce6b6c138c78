// Decode attention straight from the paged KV pool: one query token per sequence, keys and values read in place
// through the block table (no gathered copy), scores and weighted sums in float32.
//
// Work is split over (sequence, KV head) pairs; the query heads that share a KV head are handled together so
// each key and value row is loaded once for the whole group. Where the compiler targets AVX-512 and the head size
// is a multiple of 16 (up to 128), an intrinsics path runs; with AVX2 + FMA (no AVX-512) and a head size that is a
// multiple of 8, the 8-lane path of paged_decode_avx2.h; elsewhere plain loops.
#include "simd.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

constexpr int64_t kLanes = 16;

inline void load_row(const float* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }

inline void load_row(const c10::BFloat16* src, float* dst, int64_t n) {
  const uint16_t* raw = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
    std::memcpy(dst + i, &bits, sizeof(float));
  }
}

template <typename T>
inline void load_row(const T* src, float* dst, int64_t n) {  // float16, float64, int8 cache rows
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

// Cache rows: head_dim values, and for an int8 cache the row's float32 scale in the 4 bytes after them
// (kernels/reference/kv_cache.py). Float rows have no scale (1).
template <typename cache_t>
constexpr bool kQuantized = std::is_same_v<cache_t, int8_t>;

template <typename cache_t>
constexpr int64_t row_stride(int64_t dim) { return kQuantized<cache_t> ? dim + static_cast<int64_t>(sizeof(float)) : dim; }

template <typename cache_t>
inline float row_scale(const cache_t* row, int64_t dim) {
  if constexpr (kQuantized<cache_t>) {
    float s;
    std::memcpy(&s, row + dim, sizeof(float));
    return s;
  } else {
    return 1.f;
  }
}

// Blocks sit anywhere in the pool, so the hardware prefetcher restarts at every block; ask for the next block's
// rows while this one is computed (measured: the loads were the hot spot, not the arithmetic).
inline void prefetch_block(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 3);
}

// At block b of a walk through a table of `len` keys: prefetch block b + 1 (two or four blocks ahead measured no
// better for int8 rows and 1.4x slower for bfloat16 ones on the benchmark's decode shapes). The passes below
// walk their blocks in plain loops around this: folding those walks into one lambda-taking helper like
// for_each_key measured 5-20% slower in an in-process A/B (contiguous blocks: 1.62 -> 1.95 ms per layer).
template <typename cache_t>
inline void prefetch_next(const cache_t* head, const int64_t* table, int64_t b, int64_t len, int64_t block_size,
                          int64_t stride) {
  if ((b + 1) * block_size < len)
    prefetch_block(head + table[b + 1] * block_size * stride, block_size * stride * static_cast<int64_t>(sizeof(cache_t)));
}

// Calls fn(row, t) for keys t in [lo, len) of one KV head ([slots, stride] rows), block by block through the
// block table, prefetching each next block while the current one is used.
template <typename cache_t, typename Fn>
inline void for_each_key(const cache_t* head, const int64_t* table, int64_t lo, int64_t len, int64_t block_size,
                         int64_t stride, Fn&& fn) {
  for (int64_t b = lo / block_size, t = lo; t < len; ++b) {
    const int64_t off = t - b * block_size, stop = std::min(len, (b + 1) * block_size);
    const cache_t* row = head + (table[b] * block_size + off) * stride;
    prefetch_next(head, table, b, len, block_size, stride);
    for (; t < stop; ++t, row += stride) fn(row, t);
  }
}

inline float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {0.f};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  for (int64_t w = kLanes / 2; w > 0; w /= 2)  // pairwise: independent adds instead of a serial chain
    for (int64_t j = 0; j < w; ++j) acc[j] += acc[j + w];
  float s = acc[0];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void axpy(float w, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
}


#ifdef FINLLM_SIMD_AVX512
#define FINLLM_AVX512 1
using finllm_simd::load16;

inline __m512 load16(const int8_t* p) {  // int8 cache rows (their scale is applied to the dot product)
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

inline __m512 load16(const double* p) {  // float64 models: narrow to float32 like the portable path
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_loadu_pd(p))),
                            _mm512_cvtpd_ps(_mm512_loadu_pd(p + 8)), 1);
}

// exp(x) for x <= 0 (scores minus their max): 2^n * p(r) with r in [-ln2/2, ln2/2], a degree-6 polynomial
// (relative error ~2e-7, float32 rounding level); underflows to 0 below -87.
inline __m512 exp_nonpos(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_max_ps(x, lo);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_scalef_ps(p, n);
  return _mm512_mask_blend_ps(tiny, e, _mm512_setzero_ps());
}

// out lane 4g + j = the sum of v[4g + j]'s lanes: 16 horizontal sums in 45 shuffles and adds instead of 16
// separate reductions (~8 each), the dominant cost of the key pass once the dot products are two instructions.
inline __m512 transpose_reduce16(const __m512* v) {
  __m512 s[8], r[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    s[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // per 128-bit lane l: the lane-l sums of four vectors
    r[i] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * i], s[2 * i + 1], 0x44), _mm512_shuffle_ps(s[2 * i], s[2 * i + 1], 0xEE));
  const __m512 z01 = _mm512_add_ps(_mm512_shuffle_f32x4(r[0], r[1], 0x88), _mm512_shuffle_f32x4(r[0], r[1], 0xDD));
  const __m512 z23 = _mm512_add_ps(_mm512_shuffle_f32x4(r[2], r[3], 0x88), _mm512_shuffle_f32x4(r[2], r[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z01, z23, 0x88), _mm512_shuffle_f32x4(z01, z23, 0xDD));
}

// Key pass for an int8 cache: each row widened to float32 once for up to TILE query heads, q . k accumulated per
// key and reduced 16 keys at a time, then multiplied by the rows' scales. q: [group, dim] float32, already
// scaled; scores: [group, n].
template <int CH>
void key_pass_int8(const float* q, const int8_t* k_head, const int64_t* table, int64_t lo, int64_t len,
                   int64_t block_size, int64_t group, float* scores) {
  constexpr int64_t dim = 16 * CH, stride = dim + 4;
  constexpr int TILE = 4;
  const int64_t n = len - lo;
  for (int64_t g0 = 0; g0 < group; g0 += TILE) {
    const int64_t tile = std::min<int64_t>(TILE, group - g0);
    __m512 qv[TILE][CH];
    for (int g = 0; g < TILE; ++g)
      for (int c = 0; c < CH; ++c) qv[g][c] = g < tile ? _mm512_loadu_ps(q + (g0 + g) * dim + 16 * c) : _mm512_setzero_ps();
    for (int64_t b = lo / block_size, t = lo; t < len; ++b) {
      const int64_t off = t - b * block_size, stop = std::min(len, (b + 1) * block_size);
      const int8_t* rows = k_head + (table[b] * block_size + off) * stride;
      prefetch_next(k_head, table, b, len, block_size, stride);
      for (; t < stop; rows += 16 * stride) {
        const int64_t cnt = std::min<int64_t>(16, stop - t);
        __m512 part[TILE][16];
        float ks[16] = {0.f};
        for (int64_t j = 0; j < 16; ++j) {
          if (j >= cnt) {
            for (int g = 0; g < TILE; ++g) part[g][j] = _mm512_setzero_ps();
            continue;
          }
          const int8_t* row = rows + j * stride;
          ks[j] = row_scale(row, dim);
          __m512 kv[CH];
          for (int c = 0; c < CH; ++c) kv[c] = load16(row + 16 * c);
          for (int g = 0; g < TILE; ++g) {
            __m512 acc = _mm512_mul_ps(qv[g][0], kv[0]);
            for (int c = 1; c < CH; ++c) acc = _mm512_fmadd_ps(qv[g][c], kv[c], acc);
            part[g][j] = acc;
          }
        }
        const __m512 sv = _mm512_loadu_ps(ks);
        const __mmask16 m = static_cast<__mmask16>((1u << cnt) - 1);
        for (int g = 0; g < tile; ++g)
          _mm512_mask_storeu_ps(scores + (g0 + g) * n + (t - lo), m, _mm512_mul_ps(transpose_reduce16(part[g]), sv));
        t += cnt;
      }
    }
  }
}

#if defined(__AVX512BF16__) && defined(__AVX512VL__)
#define FINLLM_DECODE_DPBF16 1
// Key pass for bfloat16 with AVX512-BF16: q . k as bf16 pair dot products accumulated in float32 (two
// instructions per 64-dim row, no widening of the keys), up to 16 keys reduced at once, then scaled (the order
// Hugging Face uses: scores = (q k^T) * scale). q: [group, dim] unscaled bf16; scores: [group, n].
template <int CH2>
void key_pass_dpbf16(const c10::BFloat16* q, const c10::BFloat16* k_head, const int64_t* table, int64_t lo,
                     int64_t len, int64_t block_size, int64_t group, float scale, float* scores) {
  constexpr int64_t dim = 32 * CH2;
  const int64_t n = len - lo;
  const __m512 sv = _mm512_set1_ps(scale);
  __m512bh qv[64][CH2];
  for (int64_t g = 0; g < group; ++g)
    for (int c = 0; c < CH2; ++c) qv[g][c] = (__m512bh)_mm512_loadu_si512(q + g * dim + 32 * c);
  for (int64_t b = lo / block_size, t = lo; t < len; ++b) {
    const int64_t off = t - b * block_size, stop = std::min(len, (b + 1) * block_size);
    const c10::BFloat16* rows = k_head + (table[b] * block_size + off) * dim;
    prefetch_next(k_head, table, b, len, block_size, dim);
    for (; t < stop; rows += 16 * dim) {
      const int64_t cnt = std::min<int64_t>(16, stop - t);
      for (int64_t g = 0; g < group; ++g) {
        __m512 part[16];
        for (int64_t j = 0; j < 16; ++j) {
          if (j >= cnt) { part[j] = _mm512_setzero_ps(); continue; }
          __m512 acc = _mm512_setzero_ps();
          for (int c = 0; c < CH2; ++c)
            acc = _mm512_dpbf16_ps(acc, qv[g][c], (__m512bh)_mm512_loadu_si512(rows + j * dim + 32 * c));
          part[j] = acc;
        }
        _mm512_mask_storeu_ps(scores + g * n + (t - lo), static_cast<__mmask16>((1u << cnt) - 1),
                              _mm512_mul_ps(transpose_reduce16(part), sv));
      }
      t += cnt;
    }
  }
}

// Value pass for bfloat16 with AVX512-BF16: the weights exp(s - max) rounded to bfloat16 (Hugging Face also casts
// the probabilities to the model dtype before P @ V), two keys per bf16 pair dot product: rows t and t + 1
// interleaved 16 bits at a time, times the weight pair (p_t, p_t+1); a block's odd last key pairs with zeros.
// About half the instructions of widening every value to float32. The interleave works per 128-bit lane, so the
// two accumulators of a 32-dim chunk hold dims {0-3, 8-11, 16-19, 24-27} and {4-7, ...}: put back at the end.
// scores: [group, n] float weights, rewritten in place as bf16; out_f: [group, dim] = weighted sums * inv_sum.
template <int CH2>
void value_pass_dpbf16(const c10::BFloat16* v_head, const int64_t* table, int64_t lo, int64_t len,
                       int64_t block_size, int64_t group, float* scores, const float* inv_sum, float* out_f) {
  constexpr int64_t dim = 32 * CH2;
  constexpr int TILE = CH2 >= 4 ? 2 : 4;
  const int64_t n = len - lo;
  for (int64_t g = 0; g < group; ++g) {  // in place: bf16 i sits at byte 2i, below the float it came from
    float* s = scores + g * n;
    uint16_t* pb = reinterpret_cast<uint16_t*>(s);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = finllm_simd::tail_mask(n - i);
      const __m256i bits = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + i));
      _mm256_mask_storeu_epi16(pb + i, m, bits);
    }
  }
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int64_t g0 = 0; g0 < group; g0 += TILE) {
    const int64_t tile = std::min<int64_t>(TILE, group - g0);
    __m512 acc[TILE][CH2][2];
    for (int g = 0; g < TILE; ++g)
      for (int c = 0; c < CH2; ++c) acc[g][c][0] = acc[g][c][1] = _mm512_setzero_ps();
    auto accumulate = [&](const c10::BFloat16* r0, const c10::BFloat16* r1, int64_t i, bool pair) {
      for (int c = 0; c < CH2; ++c) {
        const __m512i a = _mm512_loadu_si512(r0 + 32 * c);
        const __m512i b = pair ? _mm512_loadu_si512(r1 + 32 * c) : _mm512_setzero_si512();
        const __m512bh lo16 = (__m512bh)_mm512_unpacklo_epi16(a, b), hi16 = (__m512bh)_mm512_unpackhi_epi16(a, b);
        for (int g = 0; g < TILE; ++g) {
          if (g >= tile) break;
          const uint16_t* pb = reinterpret_cast<const uint16_t*>(scores + (g0 + g) * n);
          const uint32_t w = pb[i] | (pair ? static_cast<uint32_t>(pb[i + 1]) << 16 : 0u);
          const __m512bh wv = (__m512bh)_mm512_set1_epi32(static_cast<int>(w));
          acc[g][c][0] = _mm512_dpbf16_ps(acc[g][c][0], lo16, wv);
          acc[g][c][1] = _mm512_dpbf16_ps(acc[g][c][1], hi16, wv);
        }
      }
    };
    for (int64_t b = lo / block_size, t = lo; t < len; ++b) {
      const int64_t off = t - b * block_size, stop = std::min(len, (b + 1) * block_size);
      const c10::BFloat16* rows = v_head + (table[b] * block_size + off) * dim;
      prefetch_next(v_head, table, b, len, block_size, dim);
      for (; t + 1 < stop; t += 2, rows += 2 * dim) accumulate(rows, rows + dim, t - lo, true);
      if (t < stop) {
        accumulate(rows, nullptr, t - lo, false);
        ++t;
      }
    }
    for (int g = 0; g < TILE; ++g) {
      if (g >= tile) break;
      const __m512 inv = _mm512_set1_ps(inv_sum[g0 + g]);
      float* o = out_f + (g0 + g) * dim;
      for (int c = 0; c < CH2; ++c) {
        _mm512_storeu_ps(o + 32 * c, _mm512_mul_ps(_mm512_permutex2var_ps(acc[g][c][0], first, acc[g][c][1]), inv));
        _mm512_storeu_ps(o + 32 * c + 16, _mm512_mul_ps(_mm512_permutex2var_ps(acc[g][c][0], second, acc[g][c][1]), inv));
      }
    }
  }
}
#endif

// One (sequence, KV head) item, head_dim = 16 * CH. q: [group, dim] float32, already scaled; q_raw: the
// unscaled query rows; out_f: [group, dim].
// Query heads go through in tiles of TILE whose queries (key pass) and accumulators (value pass) stay in
// registers; a tile reads each key and value row once. Scores hold exp(s - max); the division comes at the end.
template <typename scalar_t, typename cache_t, int CH>
void decode_item_avx512(const float* q, const scalar_t* q_raw, float scale, const cache_t* k_head,
                        const cache_t* v_head, const int64_t* table, int64_t lo, int64_t len, int64_t block_size,
                        int64_t group, float* scores, float* out_f) {
  constexpr int64_t dim = 16 * CH, stride = row_stride<cache_t>(dim);
  constexpr int TILE = CH >= 8 ? 2 : 4;
  const int64_t n = len - lo;
  bool keys_done = false;
  if constexpr (kQuantized<cache_t>) {
    key_pass_int8<CH>(q, k_head, table, lo, len, block_size, group, scores);
    keys_done = true;
  }
#ifdef FINLLM_DECODE_DPBF16
  if constexpr (std::is_same_v<scalar_t, c10::BFloat16> && std::is_same_v<cache_t, c10::BFloat16> && CH % 2 == 0) {
    key_pass_dpbf16<CH / 2>(q_raw, k_head, table, lo, len, block_size, group, scale, scores);
    keys_done = true;
  }
#endif
  for (int64_t g0 = 0; g0 < group && !keys_done; g0 += TILE) {
    const int64_t tile = std::min<int64_t>(TILE, group - g0);
    __m512 qv[TILE][CH];
    for (int g = 0; g < TILE; ++g)
      for (int c = 0; c < CH; ++c) qv[g][c] = g < tile ? _mm512_loadu_ps(q + (g0 + g) * dim + 16 * c) : _mm512_setzero_ps();
    float* sc = scores + g0 * n;
    for_each_key(k_head, table, lo, len, block_size, stride, [&](const cache_t* row, int64_t t) {
      __m512 kv[CH];
      for (int c = 0; c < CH; ++c) kv[c] = load16(row + 16 * c);
      for (int g = 0; g < TILE; ++g) {
        if (g >= tile) break;
        __m512 s = _mm512_mul_ps(qv[g][0], kv[0]);
        for (int c = 1; c < CH; ++c) s = _mm512_fmadd_ps(qv[g][c], kv[c], s);
        sc[g * n + (t - lo)] = _mm512_reduce_add_ps(s);
      }
    });
  }
  float inv_sum[64];
  for (int64_t g = 0; g < group; ++g) {
    float* s = scores + g * n;
    __m512 mv = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(s + i));
    float mx = _mm512_reduce_max_ps(mv);
    for (; i < n; ++i) mx = std::max(mx, s[i]);
    const __m512 mx_v = _mm512_set1_ps(mx);
    __m512 sum_v = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
      const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_loadu_ps(s + i), mx_v));
      _mm512_storeu_ps(s + i, e);
      sum_v = _mm512_add_ps(sum_v, e);
    }
    if (i < n) {
      const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), mx_v));
      _mm512_mask_storeu_ps(s + i, m, e);
      sum_v = _mm512_add_ps(sum_v, _mm512_maskz_mov_ps(m, e));
    }
    inv_sum[g] = 1.f / _mm512_reduce_add_ps(sum_v);
  }
#ifdef FINLLM_DECODE_DPBF16
  if constexpr (std::is_same_v<cache_t, c10::BFloat16> && CH % 2 == 0) {
    value_pass_dpbf16<CH / 2>(v_head, table, lo, len, block_size, group, scores, inv_sum, out_f);
    return;
  }
#endif
  for (int64_t g0 = 0; g0 < group; g0 += TILE) {
    const int64_t tile = std::min<int64_t>(TILE, group - g0);
    __m512 acc[TILE][CH];
    for (int g = 0; g < TILE; ++g)
      for (int c = 0; c < CH; ++c) acc[g][c] = _mm512_setzero_ps();
    const float* sc = scores + g0 * n;
    for_each_key(v_head, table, lo, len, block_size, stride, [&](const cache_t* row, int64_t t) {
      __m512 vv[CH];
      for (int c = 0; c < CH; ++c) vv[c] = load16(row + 16 * c);
      const float vs = row_scale(row, dim);
      for (int g = 0; g < TILE; ++g) {
        if (g >= tile) break;
        const __m512 p = _mm512_set1_ps(sc[g * n + (t - lo)] * vs);
        for (int c = 0; c < CH; ++c) acc[g][c] = _mm512_fmadd_ps(p, vv[c], acc[g][c]);
      }
    });
    for (int g = 0; g < TILE; ++g) {
      if (g >= tile) break;
      const __m512 inv = _mm512_set1_ps(inv_sum[g0 + g]);
      for (int c = 0; c < CH; ++c) _mm512_storeu_ps(out_f + (g0 + g) * dim + 16 * c, _mm512_mul_ps(acc[g][c], inv));
    }
  }
}

template <typename scalar_t, typename cache_t>
bool decode_item_avx512_dispatch(int64_t dim, const float* q, const scalar_t* q_raw, float scale,
                                 const cache_t* k_head, const cache_t* v_head, const int64_t* table, int64_t lo,
                                 int64_t len, int64_t block_size, int64_t group, float* scores, float* out_f) {
  if (group > 64) return false;
  switch (dim) {
    case 16: decode_item_avx512<scalar_t, cache_t, 1>(q, q_raw, scale, k_head, v_head, table, lo, len, block_size, group, scores, out_f); return true;
    case 32: decode_item_avx512<scalar_t, cache_t, 2>(q, q_raw, scale, k_head, v_head, table, lo, len, block_size, group, scores, out_f); return true;
    case 64: decode_item_avx512<scalar_t, cache_t, 4>(q, q_raw, scale, k_head, v_head, table, lo, len, block_size, group, scores, out_f); return true;
    case 80: decode_item_avx512<scalar_t, cache_t, 5>(q, q_raw, scale, k_head, v_head, table, lo, len, block_size, group, scores, out_f); return true;
    case 96: decode_item_avx512<scalar_t, cache_t, 6>(q, q_raw, scale, k_head, v_head, table, lo, len, block_size, group, scores, out_f); return true;
    case 128: decode_item_avx512<scalar_t, cache_t, 8>(q, q_raw, scale, k_head, v_head, table, lo, len, block_size, group, scores, out_f); return true;
    default: return false;
  }
}
#endif

#if !defined(FINLLM_AVX512) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FINLLM_DECODE_AVX2 1
}  // namespace
#include "paged_decode_avx2.h"
namespace {
#endif

template <typename scalar_t, typename cache_t>
void decode_kernel(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                   const torch::Tensor& block_tables, const torch::Tensor& kv_lens, int64_t block_size,
                   double scale, int64_t window, torch::Tensor& out) {
  const int64_t rows = q.size(0), num_heads = q.size(1), dim = q.size(2);
  const int64_t kv_heads = k_cache.size(0), num_slots = k_cache.size(1), stride = row_stride<cache_t>(dim);
  const int64_t group = num_heads / kv_heads;
  const int64_t max_blocks = block_tables.size(1);
  const scalar_t* qp = q.data_ptr<scalar_t>();
  const cache_t* kp = k_cache.data_ptr<cache_t>();
  const cache_t* vp = v_cache.data_ptr<cache_t>();
  const int64_t* tp = block_tables.data_ptr<int64_t>();
  const int64_t* lp = kv_lens.data_ptr<int64_t>();
  scalar_t* op = out.data_ptr<scalar_t>();
  const float fscale = static_cast<float>(scale);

  // Dynamic scheduling, longest rows first: rows arrive sorted by ascending length, so equal static halves would
  // leave one thread idle, and taking them in order would leave the longest item for last.
  const int64_t items = rows * kv_heads;
#pragma omp parallel num_threads(at::get_num_threads())
  {
    std::vector<float> qf(group * dim), row(dim), acc(group * dim), out_f(group * dim), scores, inv_sum(group);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t r = rows - 1 - item / kv_heads, h = item % kv_heads;
      const int64_t len = lp[r];
      const int64_t lo = window > 0 ? std::max<int64_t>(0, len - window) : 0;
      const int64_t n = len - lo;
      const int64_t* table = tp + r * max_blocks;
      const int64_t head_base = h * num_slots;
      for (int64_t g = 0; g < group; ++g) {
        load_row(qp + (r * num_heads + h * group + g) * dim, qf.data() + g * dim, dim);
        for (int64_t d = 0; d < dim; ++d) qf[g * dim + d] *= fscale;
      }
#ifdef FINLLM_AVX512
      scores.resize(group * n);
      if (decode_item_avx512_dispatch<scalar_t, cache_t>(dim, qf.data(), qp + (r * num_heads + h * group) * dim,
                                                         fscale, kp + head_base * stride, vp + head_base * stride,
                                                         table, lo, len,
                                                block_size, group, scores.data(), out_f.data())) {
        for (int64_t g = 0; g < group; ++g) {
          scalar_t* o = op + (r * num_heads + h * group + g) * dim;
          for (int64_t d = 0; d < dim; ++d) o[d] = static_cast<scalar_t>(out_f[g * dim + d]);
        }
        continue;
      }
#endif
#ifdef FINLLM_DECODE_AVX2
      if constexpr (finllm_decode_avx2::kLoads<cache_t>) {
        if (dim % 8 == 0 && group <= 64) {
          scores.resize(group * n);
          finllm_decode_avx2::decode_item<cache_t>(qf.data(), kp + head_base * stride, vp + head_base * stride, table,
                                                   lo, len, block_size, stride, dim, group, scores.data(),
                                                   out_f.data());
          for (int64_t g = 0; g < group; ++g) {
            scalar_t* o = op + (r * num_heads + h * group + g) * dim;
            for (int64_t d = 0; d < dim; ++d) o[d] = static_cast<scalar_t>(out_f[g * dim + d]);
          }
          continue;
        }
      }
#endif
      scores.assign(group * n, 0.f);
      for_each_key(kp + head_base * stride, table, lo, len, block_size, stride, [&](const cache_t* key, int64_t t) {
        load_row(key, row.data(), dim);
        const float ks = row_scale(key, dim);
        for (int64_t g = 0; g < group; ++g) scores[g * n + (t - lo)] = dot(qf.data() + g * dim, row.data(), dim) * ks;
      });
      for (int64_t g = 0; g < group; ++g) {
        float* s = scores.data() + g * n;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
        float sum = 0.f;
        for (int64_t i = 0; i < n; ++i) {
          s[i] = std::exp(s[i] - mx);
          sum += s[i];
        }
        inv_sum[g] = 1.f / sum;
      }
      std::fill(acc.begin(), acc.end(), 0.f);
      for_each_key(vp + head_base * stride, table, lo, len, block_size, stride, [&](const cache_t* val, int64_t t) {
        load_row(val, row.data(), dim);
        const float vs = row_scale(val, dim);
        for (int64_t g = 0; g < group; ++g) axpy(scores[g * n + (t - lo)] * vs, row.data(), acc.data() + g * dim, dim);
      });
      for (int64_t g = 0; g < group; ++g) {
        scalar_t* o = op + (r * num_heads + h * group + g) * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] = static_cast<scalar_t>(acc[g * dim + d] * inv_sum[g]);
      }
    }
  }
}

}  // namespace

// q: [R, Hq, D]; caches: [Hkv, slots, D] of q's dtype, or int8 rows [Hkv, slots, D + 4] (values, then the float32
// scale); block_tables: [R, max_blocks] int64; kv_lens: [R] int64 (keys per row, the new token included, already
// stored); window: keys kept per row (0 = all). out: [R, Hq, D], written.
void paged_decode_attention(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                            torch::Tensor block_tables, torch::Tensor kv_lens, int64_t block_size, double scale,
                            int64_t window, torch::Tensor out) {
  const bool quantized = k_cache.scalar_type() == torch::kInt8;
  TORCH_CHECK(q.dim() == 3 && out.sizes() == q.sizes(), "q and out must be [rows, heads, head_dim]");
  TORCH_CHECK(k_cache.dim() == 3 && k_cache.sizes() == v_cache.sizes(), "caches must be [kv_heads, slots, row]");
  TORCH_CHECK(k_cache.size(2) == q.size(2) + (quantized ? static_cast<int64_t>(sizeof(float)) : 0) &&
                  q.size(1) % k_cache.size(0) == 0, "head shapes do not match");
  TORCH_CHECK((quantized || q.scalar_type() == k_cache.scalar_type()) &&
                  k_cache.scalar_type() == v_cache.scalar_type() && q.scalar_type() == out.scalar_type(),
              "q and out must share one dtype, and the caches q's dtype or int8");
  TORCH_CHECK(q.is_contiguous() && k_cache.is_contiguous() && v_cache.is_contiguous() && out.is_contiguous(),
              "tensors must be contiguous");
  TORCH_CHECK(block_tables.scalar_type() == torch::kInt64 && kv_lens.scalar_type() == torch::kInt64 &&
                  block_tables.is_contiguous() && kv_lens.is_contiguous(), "block tables and lengths must be int64");
  TORCH_CHECK(block_tables.size(0) == q.size(0) && kv_lens.size(0) == q.size(0), "one table and length per row");
  TORCH_CHECK(!q.is_cuda(), "CPU kernel");
  TORCH_CHECK(block_size > 0, "block_size must be positive");
  const int64_t* lens = kv_lens.data_ptr<int64_t>();  // every row's keys must lie inside its block table:
  const int64_t* tables = block_tables.data_ptr<int64_t>();  // ...and every block it reads inside the pool
  const int64_t nblk = block_tables.size(1), pool_blocks = k_cache.size(1) / block_size;
  for (int64_t r = 0; r < q.size(0); ++r) {              // the reads below are not bounds-checked
    TORCH_CHECK(lens[r] > 0 && lens[r] <= nblk * block_size, "kv_lens out of range for the block tables");
    for (int64_t b = 0, used = (lens[r] + block_size - 1) / block_size; b < used; ++b)
      TORCH_CHECK(tables[r * nblk + b] >= 0 && tables[r * nblk + b] < pool_blocks, "row ", r, ": block ",
                  tables[r * nblk + b], " lies outside the KV pool of ", pool_blocks, " blocks");
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "paged_decode_attention", [&] {
    if (quantized)
      decode_kernel<scalar_t, int8_t>(q, k_cache, v_cache, block_tables, kv_lens, block_size, scale, window, out);
    else
      decode_kernel<scalar_t, scalar_t>(q, k_cache, v_cache, block_tables, kv_lens, block_size, scale, window, out);
  });
}
