// Python bindings of the native CPU kernels (one extension module; each kernel lives in its own file).
#include <torch/extension.h>

void paged_decode_attention(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                            torch::Tensor block_tables, torch::Tensor kv_lens, int64_t block_size, double scale,
                            int64_t window, torch::Tensor out);
std::vector<torch::Tensor> quantize_rows(torch::Tensor x);
void dequantize_rows(torch::Tensor acc, torch::Tensor weight_scale, torch::Tensor row_scale,
                     c10::optional<torch::Tensor> bias, torch::Tensor out);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_decode_attention", &paged_decode_attention, "Decode attention over the paged KV pool (CPU)");
  m.def("quantize_rows", &quantize_rows, "Per-row symmetric int8 quantization: (int8 [M, K], float32 scale [M, 1])");
  m.def("dequantize_rows", &dequantize_rows, "out = int32 acc * weight_scale * row_scale (+ bias), in out's dtype");
}
