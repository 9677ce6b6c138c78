// What the two packed-weight int8 GEMMs share (int8_gemm.cpp: AVX512-VNNI; int8_gemm_avx2.cpp: AVX2; one of them
// is compiled): the argument checks of their entry points and unpacking, which differ only in the packed layout
// (its size and where each weight byte lives).
#pragma once

#include <torch/extension.h>

#include <cstdint>

namespace finllm_int8_gemm {

inline void check_packed(const torch::Tensor& packed, int64_t n, int64_t k, int64_t total_bytes) {
  TORCH_CHECK(packed.scalar_type() == torch::kInt8 && packed.is_contiguous() && packed.numel() == total_bytes,
              "packed does not hold an [", n, ", ", k, "] weight from pack_int8_weight");
}

inline torch::Tensor contiguous_weight(const torch::Tensor& qweight) {
  TORCH_CHECK(qweight.dim() == 2 && qweight.scalar_type() == torch::kInt8 && !qweight.is_cuda(),
              "qweight must be a 2-D int8 CPU tensor");
  return qweight.contiguous();
}

// Checks int8_linear's arguments; returns the bias as contiguous float32, or an undefined tensor without one.
// total_bytes(k): the packed size of an [n, k] weight in the caller's layout.
template <typename TotalBytes>
torch::Tensor check_linear_args(const torch::Tensor& x, const torch::Tensor& packed, int64_t n,
                                const torch::Tensor& w_scale, const c10::optional<torch::Tensor>& bias,
                                TotalBytes total_bytes) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && !x.is_cuda(), "x must be a contiguous 2-D CPU tensor");
  check_packed(packed, n, x.size(1), total_bytes(x.size(1)));
  TORCH_CHECK(w_scale.scalar_type() == torch::kFloat32 && w_scale.is_contiguous() && w_scale.numel() == n,
              "w_scale: float32 [N]");
  if (!bias.has_value()) return torch::Tensor();
  torch::Tensor bias_f = bias->to(torch::kFloat32).contiguous();
  TORCH_CHECK(bias_f.numel() == n, "bias: [N]");
  return bias_f;
}

// The [N, K] int8 weight back from a packed layout; offset(n, k) is the byte of W[n][k].
template <typename Offset>
torch::Tensor unpack(const torch::Tensor& packed, int64_t n, int64_t k, int64_t total_bytes, Offset offset) {
  check_packed(packed, n, k, total_bytes);
  auto w = torch::empty({n, k}, packed.options());
  const int8_t* src = packed.data_ptr<int8_t>();
  int8_t* dst = w.data_ptr<int8_t>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t kk = 0; kk < k; ++kk) dst[r * k + kk] = src[offset(r, kk)];
  return w;
}

}  // namespace finllm_int8_gemm
