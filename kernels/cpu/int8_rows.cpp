// The two elementwise ends of the W8A8 linear (kernels/reference/int8_gemm.py), each as one pass over memory.
//
// The eager version makes about ten passes (copy to float32, abs, amax, divide, round, cast; then cast, two
// multiplies, bias, cast back). These do the same float operations in the same order, so results are
// bit-identical to the reference (tested), and an int8 request's output does not depend on the backend.
#include "int8_quant.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#ifdef FINLLM_SIMD_AVX512
#define FINLLM_INT8_AVX512 1
#endif

namespace {
#ifdef FINLLM_INT8_AVX512
// float -> bfloat16 and friends do not vectorise; this loop does the same IEEE operations 16 lanes at a time
// (int32 -> float, two multiplies, round-half-even) so the results stay bit-identical.
using finllm_simd::store16;
template <typename T>  // other dtypes (float16, float64) take the scalar loop; this keeps the code compiling
void store16(T* p, __m512 v) {
  float tmp[16];
  _mm512_storeu_ps(tmp, v);
  for (int i = 0; i < 16; ++i) p[i] = static_cast<T>(tmp[i]);
}
template <typename T> constexpr bool kVec = std::is_same_v<T, float> || std::is_same_v<T, c10::BFloat16>;
#endif
}  // namespace

std::vector<torch::Tensor> quantize_rows(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && !x.is_cuda(), "x must be a contiguous 2-D CPU tensor");
  const int64_t rows = x.size(0), cols = x.size(1);
  auto q = torch::empty({rows, cols}, x.options().dtype(torch::kInt8));
  auto scale = torch::empty({rows, 1}, x.options().dtype(torch::kFloat32));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "quantize_rows", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    int8_t* qp = q.data_ptr<int8_t>();
    float* sp = scale.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      std::vector<float> row(cols);
      for (int64_t i = begin; i < end; ++i) sp[i] = finllm_int8::quantize_row(xp + i * cols, cols, row.data(), qp + i * cols);
    });
  });
  return {q, scale};
}

void dequantize_rows(torch::Tensor acc, torch::Tensor weight_scale, torch::Tensor row_scale,
                     c10::optional<torch::Tensor> bias, torch::Tensor out) {
  TORCH_CHECK(acc.dim() == 2 && acc.scalar_type() == torch::kInt32 && acc.is_contiguous(), "acc: int32 [M, N]");
  const int64_t rows = acc.size(0), cols = acc.size(1);
  TORCH_CHECK(weight_scale.scalar_type() == torch::kFloat32 && weight_scale.is_contiguous() &&
                  weight_scale.numel() == cols, "weight_scale: float32 [N]");
  TORCH_CHECK(row_scale.scalar_type() == torch::kFloat32 && row_scale.is_contiguous() && row_scale.numel() == rows,
              "row_scale: float32 [M, 1]");
  TORCH_CHECK(out.dim() == 2 && out.size(0) == rows && out.size(1) == cols && out.stride(1) == 1, "out: [M, N] rows");
  std::vector<float> b;
  if (bias.has_value()) {
    auto bf = bias->to(torch::kFloat32).contiguous();
    TORCH_CHECK(bf.numel() == cols, "bias: [N]");
    b.assign(bf.data_ptr<float>(), bf.data_ptr<float>() + cols);
  }
  const int32_t* ap = acc.data_ptr<int32_t>();
  const float* wp = weight_scale.data_ptr<float>();
  const float* rp = row_scale.data_ptr<float>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_rows", [&] {
    scalar_t* op = out.data_ptr<scalar_t>();
    const int64_t stride = out.stride(0);
    at::parallel_for(0, rows, 8, [&](int64_t begin, int64_t end) {
      std::vector<float> tmp(cols);
      for (int64_t i = begin; i < end; ++i) {
        const int32_t* src = ap + i * cols;
        const float rs = rp[i];
        scalar_t* dst = op + i * stride;
#ifdef FINLLM_INT8_AVX512
        if constexpr (kVec<scalar_t>) {
          const __m512 rsv = _mm512_set1_ps(rs);
          int64_t n = 0;
          for (; n + 16 <= cols; n += 16) {
            __m512 t = _mm512_cvtepi32_ps(_mm512_loadu_si512(src + n));
            t = _mm512_mul_ps(_mm512_mul_ps(t, _mm512_loadu_ps(wp + n)), rsv);
            if (!b.empty()) t = _mm512_add_ps(t, _mm512_loadu_ps(b.data() + n));
            store16(dst + n, t);
          }
          for (; n < cols; ++n) {
            float t = static_cast<float>(src[n]) * wp[n] * rs;
            if (!b.empty()) t += b[n];
            dst[n] = static_cast<scalar_t>(t);
          }
          continue;
        }
#endif
        for (int64_t n = 0; n < cols; ++n) tmp[n] = static_cast<float>(src[n]) * wp[n] * rs;
        if (!b.empty())
          for (int64_t n = 0; n < cols; ++n) tmp[n] += b[n];
        for (int64_t n = 0; n < cols; ++n) dst[n] = static_cast<scalar_t>(tmp[n]);
      }
    });
  });
}
