// Python bindings of the native CPU kernels (one extension module; each kernel lives in its own file).
#include <torch/extension.h>

#include <map>
#include <string>
#include <vector>

void paged_decode_attention(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                            torch::Tensor block_tables, torch::Tensor kv_lens, int64_t block_size, double scale,
                            int64_t window, torch::Tensor out);
std::vector<torch::Tensor> quantize_rows(torch::Tensor x);
void dequantize_rows(torch::Tensor acc, torch::Tensor weight_scale, torch::Tensor row_scale,
                     c10::optional<torch::Tensor> bias, torch::Tensor out);
std::vector<torch::Tensor> fused_add_rms_norm(torch::Tensor x, c10::optional<torch::Tensor> residual,
                                              torch::Tensor weight, double eps);
torch::Tensor fused_silu_and_mul(torch::Tensor x);
torch::Tensor fused_rotary(torch::Tensor x, torch::Tensor cos, torch::Tensor sin);
void causal_softmax_(torch::Tensor scores, int64_t block);
std::map<std::string, std::vector<std::string>> fused_dtypes();
void store_kv_(torch::Tensor k, torch::Tensor v, torch::Tensor k_cache, torch::Tensor v_cache, torch::Tensor slots);
bool has_int8_gemm();
torch::Tensor pack_int8_weight(torch::Tensor qweight);
torch::Tensor unpack_int8_weight(torch::Tensor packed, int64_t n, int64_t k);
torch::Tensor int8_linear(torch::Tensor x, torch::Tensor packed, int64_t n, torch::Tensor w_scale,
                          c10::optional<torch::Tensor> bias);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_decode_attention", &paged_decode_attention, "Decode attention over the paged KV pool (CPU)");
  m.def("quantize_rows", &quantize_rows, "Per-row symmetric int8 quantization: (int8 [M, K], float32 scale [M, 1])");
  m.def("fused_add_rms_norm", &fused_add_rms_norm, "(RMSNorm(x + residual), x + residual) in one pass");
  m.def("fused_silu_and_mul", &fused_silu_and_mul, "SiLU(gate) * up over [T, 2I]");
  m.def("fused_rotary", &fused_rotary, "Rotary embedding of [T, H, D]");
  m.def("causal_softmax_", &causal_softmax_, "In-place softmax under a query block's causal mask (bf16/fp16)");
  m.def("store_kv_", &store_kv_, "Write new keys and values into the paged pool at their slots");
  m.def("fused_dtypes", &fused_dtypes, "Activation dtypes of the fused kernels in this build: elementwise (norm, "
        "SiLU, rotary: bf16/fp16 with AVX-512, float32 with AVX2 only) and causal_softmax (bf16/fp16, AVX-512)");
  m.def("has_int8_gemm", &has_int8_gemm, "Whether the packed-weight int8 GEMM was compiled (AVX512-VNNI or AVX2)");
  m.def("pack_int8_weight", &pack_int8_weight, "int8 [N, K] weight -> the layout int8_linear reads");
  m.def("unpack_int8_weight", &unpack_int8_weight, "The [N, K] int8 weight back from pack_int8_weight's layout");
  m.def("int8_linear", &int8_linear, "W8A8 linear over a packed weight: [M, K] -> [M, N] in x's dtype");
  m.def("dequantize_rows", &dequantize_rows, "out = int32 acc * weight_scale * row_scale (+ bias), in out's dtype");
}
