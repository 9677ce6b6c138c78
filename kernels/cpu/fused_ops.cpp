// The decoder layer's elementwise steps as single passes: add + RMSNorm, SiLU x up, rotary embedding, and the
// causal softmax of the CPU prefill attention for bfloat16/float16 activations with AVX-512; the first three for
// float32 activations on AVX2 CPUs without AVX-512 (fused_ops_avx2.h).
//
// Eager torch runs each as three to seven ops, every one a full read and write of the activations plus a
// dispatch. These kernels do the reference's float operations in the reference's order, with the same roundings
// to the activation dtype and the same exp (torch's Sleef), so their outputs are bit-identical to
// kernels/reference (tested). Dtypes a build does not cover keep the torch ops (`fused_dtypes()` tells the
// dispatcher which).
#include "simd.h"
#include "torch_row_sum.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#ifdef FINLLM_SIMD_AVX512
using namespace finllm_simd;

namespace {

template <typename T>
inline __m512 round_to(__m512 v) { return finllm_simd::round_to(static_cast<T*>(nullptr), v); }

template <typename T>
inline float round_to(float v) { return static_cast<float>(static_cast<T>(v)); }

template <typename T>
void add_rms_norm_rows(const T* x, const T* res, const T* w, T* out, T* res_out, int64_t rows, int64_t dim,
                       float eps) {
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> h(dim), sq(dim);
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * dim;
      int64_t d = 0;
      for (; d < dim; d += 16) {
        const __mmask16 m = tail_mask(dim - d);
        __m512 v = load16(xr + d, m);
        if (res != nullptr) {  // x + residual in T, as the reference's eager add rounds it
          v = round_to<T>(_mm512_add_ps(v, load16(res + r * dim + d, m)));
          store16(res_out + r * dim + d, v, m);
        }
        _mm512_mask_storeu_ps(h.data() + d, m, v);
        _mm512_mask_storeu_ps(sq.data() + d, m, _mm512_mul_ps(v, v));
      }
      const float var = finllm_sum::torch_row_sum(sq.data(), dim) / static_cast<float>(dim);
      const __m512 rs = _mm512_set1_ps(1.f / std::sqrt(var + eps));
      for (d = 0; d < dim; d += 16) {
        const __mmask16 m = tail_mask(dim - d);
        const __m512 n = round_to<T>(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, h.data() + d), rs));
        store16(out + r * dim + d, _mm512_mul_ps(load16(w + d, m), n), m);
      }
    }
  });
}

// SiLU(g) = g / (1 + exp(-g)) rounded to T, times up, rounded to T. torch vectorises the first multiple of 64
// elements of each row and runs the rest through its scalar lambda (std::exp): so does this.
template <typename T>
void silu_mul_rows(const T* x, T* out, int64_t rows, int64_t inter) {
  const int64_t vec_end = inter - inter % 64;
  at::parallel_for(0, rows, 8, [&](int64_t begin, int64_t end) {
    const __m512 one = _mm512_set1_ps(1.f);
    for (int64_t r = begin; r < end; ++r) {
      const T* g = x + r * 2 * inter;
      const T* u = g + inter;
      T* o = out + r * inter;
      int64_t d = 0;
      for (; d < vec_end; d += 16) {
        const __m512 gv = load16(g + d);
        const __m512 neg = _mm512_xor_ps(gv, _mm512_set1_ps(-0.f));
        const __m512 s = round_to<T>(_mm512_div_ps(gv, _mm512_add_ps(one, Sleef_expf16_u10(neg))));
        store16(o + d, _mm512_mul_ps(s, load16(u + d)));
      }
      for (; d < inter; ++d) {
        const float gf = static_cast<float>(g[d]);
        const float s = round_to<T>(gf / (1.0f + std::exp(-gf)));
        o[d] = static_cast<T>(s * static_cast<float>(u[d]));
      }
    }
  });
}

// out = x * cos + rotate_half(x) * sin with each product and the sum rounded to T, as the eager reference does.
template <typename T>
void rotary_rows(const T* x, int64_t row_stride, int64_t heads, int64_t dim, const T* cos, const T* sin, T* out,
                 int64_t rows) {
  const int64_t half = dim / 2;
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    const __m512 sign = _mm512_set1_ps(-0.f);
    for (int64_t r = begin; r < end; ++r) {
      const T* c = cos + r * dim;
      const T* s = sin + r * dim;
      for (int64_t h = 0; h < heads; ++h) {
        const T* xr = x + r * row_stride + h * dim;
        T* o = out + (r * heads + h) * dim;
        for (int64_t d = 0; d < half; d += 16) {
          const __mmask16 m = tail_mask(half - d);
          const __m512 lo = load16(xr + d, m), hi = load16(xr + half + d, m);
          const __m512 c_lo = load16(c + d, m), c_hi = load16(c + half + d, m);
          const __m512 s_lo = load16(s + d, m), s_hi = load16(s + half + d, m);
          const __m512 out_lo = _mm512_add_ps(round_to<T>(_mm512_mul_ps(lo, c_lo)),
                                              round_to<T>(_mm512_mul_ps(_mm512_xor_ps(hi, sign), s_lo)));
          const __m512 out_hi = _mm512_add_ps(round_to<T>(_mm512_mul_ps(hi, c_hi)), round_to<T>(_mm512_mul_ps(lo, s_hi)));
          store16(o + d, out_lo, m);
          store16(o + half + d, out_hi, m);
        }
      }
    }
  });
}

// In place over rows of `keys` scores; row i may see its first keys - block + (i % block) + 1 keys (the causal
// diagonal sits in the last `block` columns), the rest become 0. Same steps as torch's reduced-precision
// softmax (aten _vec_softmax_lastdim): float max; exp(x - max) with 16-lane sums up to the last multiple of 16
// and std::exp after it; the lanes reduced in its order; each value times 1 / sum.
template <typename T>
void causal_softmax_rows(T* scores, int64_t rows, int64_t keys, int64_t block) {
  const int64_t vec_end = keys - keys % 16;
  at::parallel_for(0, rows, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(keys);
    for (int64_t r = begin; r < end; ++r) {
      T* row = scores + r * keys;
      const int64_t n = keys - block + (r % block) + 1;
      __m512 mx_v = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t d = 0; d < n; d += 16) {
        const __mmask16 m = tail_mask(n - d);
        const __m512 v = load16(row + d, m);
        _mm512_mask_storeu_ps(buf.data() + d, m, v);
        mx_v = _mm512_mask_max_ps(mx_v, m, mx_v, v);
      }
      const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(mx_v));
      __m512 sum_v = _mm512_setzero_ps();
      const int64_t nv = std::min(n, vec_end);
      for (int64_t d = 0; d < nv; d += 16) {
        const __mmask16 m = tail_mask(nv - d);
        const __m512 e = _mm512_maskz_mov_ps(m, Sleef_expf16_u10(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, buf.data() + d), mx)));
        sum_v = _mm512_add_ps(sum_v, e);
        _mm512_mask_storeu_ps(buf.data() + d, m, e);
      }
      float sum = reduce_add_like_torch(sum_v);
      const float mxf = _mm512_cvtss_f32(mx);
      for (int64_t d = nv; d < n; ++d) {
        buf[d] = std::exp(buf[d] - mxf);
        sum += buf[d];
      }
      const float inv = 1.f / sum;
      const __m512 iv = _mm512_set1_ps(inv);
      int64_t d = 0;
      for (; d + 16 <= n; d += 16) store16(row + d, _mm512_mul_ps(_mm512_loadu_ps(buf.data() + d), iv));
      for (; d < n; ++d) row[d] = static_cast<T>(buf[d] * inv);
      for (; d < keys; ++d) row[d] = static_cast<T>(0.f);
    }
  });
}

}  // namespace
#elif defined(__AVX2__)
#include "fused_ops_avx2.h"
#endif

namespace {

// The activation dtypes this build's elementwise kernels (norm, SiLU, rotary) take: each one's reference
// rounding and exp were matched for that CPU path only.
std::vector<at::ScalarType> elementwise_dtypes() {
#if defined(FINLLM_SIMD_AVX512)
  return {at::kBFloat16, at::kHalf};
#elif defined(__AVX2__)
  return {at::kFloat};
#else
  return {};
#endif
}

void check_elementwise(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(!t.is_cuda(), what, ": CPU kernel");
  for (const auto d : elementwise_dtypes())
    if (t.scalar_type() == d) return;
  TORCH_CHECK(false, what, ": this build takes ", elementwise_dtypes(), " (other dtypes use the torch ops), not ",
              t.scalar_type());
}

void check_softmax(const torch::Tensor& t) {
  TORCH_CHECK(!t.is_cuda(), "causal_softmax_: CPU kernel");
  TORCH_CHECK(t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf,
              "causal_softmax_: bfloat16 or float16 only (float32 prefill uses the flash kernel)");
#if !defined(FINLLM_SIMD_AVX512)
  TORCH_CHECK(false, "causal_softmax_ needs AVX-512");
#endif
}

#if defined(FINLLM_SIMD_AVX512)
#define FINLLM_DISPATCH_REDUCED(dtype, ...)                               \
  if ((dtype) == at::kBFloat16) {                                          \
    using scalar_t = c10::BFloat16;                                        \
    __VA_ARGS__();                                                         \
  } else {                                                                 \
    using scalar_t = c10::Half;                                            \
    __VA_ARGS__();                                                         \
  }
#endif

}  // namespace

// x, residual: [T, H]; weight: [H]. Returns (norm(x + residual), x + residual), or (norm(x), x) without residual.
std::vector<torch::Tensor> fused_add_rms_norm(torch::Tensor x, c10::optional<torch::Tensor> residual,
                                              torch::Tensor weight, double eps) {
  check_elementwise(x, "fused_add_rms_norm");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && weight.is_contiguous() && weight.numel() == x.size(1) &&
                  weight.scalar_type() == x.scalar_type(), "x must be contiguous [T, H] with a [H] weight of its dtype");
  const bool has_res = residual.has_value();
  if (has_res)
    TORCH_CHECK(residual->sizes() == x.sizes() && residual->is_contiguous() && residual->scalar_type() == x.scalar_type(),
                "residual must match x");
  auto out = torch::empty_like(x);
  auto res_out = has_res ? torch::empty_like(x) : x;
#if defined(FINLLM_SIMD_AVX512)
  FINLLM_DISPATCH_REDUCED(x.scalar_type(), [&] {
    add_rms_norm_rows<scalar_t>(x.data_ptr<scalar_t>(), has_res ? residual->data_ptr<scalar_t>() : nullptr,
                                weight.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                has_res ? res_out.data_ptr<scalar_t>() : nullptr, x.size(0), x.size(1),
                                static_cast<float>(eps));
  });
#elif defined(__AVX2__)
  finllm_fused_avx2::add_rms_norm_rows(x.data_ptr<float>(), has_res ? residual->data_ptr<float>() : nullptr,
                                       weight.data_ptr<float>(), out.data_ptr<float>(),
                                       has_res ? res_out.data_ptr<float>() : nullptr, x.size(0), x.size(1),
                                       static_cast<float>(eps));
#endif
  return {out, res_out};
}

// x: [T, 2I] (gate, up) -> [T, I].
torch::Tensor fused_silu_and_mul(torch::Tensor x) {
  check_elementwise(x, "fused_silu_and_mul");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.size(1) % 2 == 0, "x must be contiguous [T, 2I]");
  auto out = torch::empty({x.size(0), x.size(1) / 2}, x.options());
#if defined(FINLLM_SIMD_AVX512)
  FINLLM_DISPATCH_REDUCED(x.scalar_type(), [&] {
    silu_mul_rows<scalar_t>(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), x.size(0), x.size(1) / 2);
  });
#elif defined(__AVX2__)
  finllm_fused_avx2::silu_mul_rows(x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1) / 2);
#endif
  return out;
}

// x: [T, H, D] with unit stride over H and D (a column slice of the fused QKV output); cos, sin: [T, D].
// Returns a contiguous [T, H, D].
torch::Tensor fused_rotary(torch::Tensor x, torch::Tensor cos, torch::Tensor sin) {
  check_elementwise(x, "fused_rotary");
  TORCH_CHECK(x.dim() == 3 && x.stride(2) == 1 && x.stride(1) == x.size(2) && x.size(2) % 2 == 0,
              "x must be [T, H, D] with contiguous heads and an even head size");
  TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous() && cos.sizes() == sin.sizes() && cos.dim() == 2 &&
                  cos.size(0) == x.size(0) && cos.size(1) == x.size(2) && cos.scalar_type() == x.scalar_type() &&
                  sin.scalar_type() == x.scalar_type(), "cos and sin must be contiguous [T, D] of x's dtype");
  auto out = torch::empty(x.sizes(), x.options());
#if defined(FINLLM_SIMD_AVX512)
  FINLLM_DISPATCH_REDUCED(x.scalar_type(), [&] {
    rotary_rows<scalar_t>(x.data_ptr<scalar_t>(), x.stride(0), x.size(1), x.size(2), cos.data_ptr<scalar_t>(),
                          sin.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), x.size(0));
  });
#elif defined(__AVX2__)
  finllm_fused_avx2::rotary_rows(x.data_ptr<float>(), x.stride(0), x.size(1), x.size(2), cos.data_ptr<float>(),
                                 sin.data_ptr<float>(), out.data_ptr<float>(), x.size(0));
#endif
  return out;
}

// scores: contiguous [..., block, keys], softmaxed in place over keys under the causal mask of a query block whose
// last row sees all keys.
void causal_softmax_(torch::Tensor scores, int64_t block) {
  check_softmax(scores);
  TORCH_CHECK(scores.is_contiguous() && scores.dim() >= 2 && scores.size(-2) == block && block >= 1 &&
                  scores.size(-1) >= block, "scores must be contiguous [..., block, keys] with keys >= block");
#if defined(FINLLM_SIMD_AVX512)
  const int64_t keys = scores.size(-1);
  FINLLM_DISPATCH_REDUCED(scores.scalar_type(), [&] {
    causal_softmax_rows<scalar_t>(scores.data_ptr<scalar_t>(), scores.numel() / keys, keys, block);
  });
#endif
}

// Dtype names (torch's) each fused kernel of this build takes: {"elementwise": [...], "causal_softmax": [...]}.
std::map<std::string, std::vector<std::string>> fused_dtypes() {
  std::vector<std::string> names;
  for (const auto d : elementwise_dtypes()) names.emplace_back(d == at::kFloat ? "float32" : d == at::kHalf ? "float16" : "bfloat16");
#if defined(FINLLM_SIMD_AVX512)
  return {{"elementwise", names}, {"causal_softmax", {"bfloat16", "float16"}}};
#else
  return {{"elementwise", names}, {"causal_softmax", {}}};
#endif
}
