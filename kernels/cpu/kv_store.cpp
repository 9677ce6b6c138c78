// Writes a step's new keys and values into the paged pool: one row per (token, KV head).
//
// torch's index_copy_ over dim 1 of the [kv_heads, slots, head_dim] pool ran ~34 us per call on the standard
// benchmark (two calls per layer and step, ~0.55 s of a 46 s run); this is a bounds-checked loop. Float caches get
// a memcpy per row (exact for every dtype); int8 caches get the row quantized in place, head_dim int8 values and
// then the float32 scale's bytes (kernels/reference/kv_cache.py), bit-identical to the reference.
#include "int8_quant.h"

#include <cstring>
#include <vector>

namespace {

void store_rows(const torch::Tensor& src, torch::Tensor& cache, const int64_t* slots, int64_t tokens) {
  const int64_t heads = cache.size(0), num_slots = cache.size(1), dim = cache.size(2);
  const int64_t elem = cache.element_size(), row_bytes = dim * elem;
  const char* sp = static_cast<const char*>(src.data_ptr());
  char* cp = static_cast<char*>(cache.data_ptr());
  const int64_t tok_stride = src.stride(0) * elem;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      std::memcpy(cp + (h * num_slots + slots[t]) * row_bytes, sp + t * tok_stride + h * row_bytes, row_bytes);
}

void store_rows_int8(const torch::Tensor& src, torch::Tensor& cache, const int64_t* slots, int64_t tokens) {
  const int64_t heads = cache.size(0), num_slots = cache.size(1), width = cache.size(2), dim = src.size(2);
  int8_t* cp = cache.data_ptr<int8_t>();
  std::vector<float> tmp(dim);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, src.scalar_type(), "store_kv_int8", [&] {
    const scalar_t* sp = src.data_ptr<scalar_t>();
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        int8_t* row = cp + (h * num_slots + slots[t]) * width;
        const float s = finllm_int8::quantize_row(sp + t * src.stride(0) + h * dim, dim, tmp.data(), row);
        std::memcpy(row + dim, &s, sizeof(float));
      }
  });
}

void check_source(const torch::Tensor& x, const torch::Tensor& cache, const char* what) {
  const bool quantized = cache.scalar_type() == torch::kInt8;
  TORCH_CHECK(x.dim() == 3 && x.size(1) == cache.size(0) &&
                  x.size(2) + (quantized ? static_cast<int64_t>(sizeof(float)) : 0) == cache.size(2),
              what, " must be [tokens, kv_heads, head_dim] matching the cache");
  TORCH_CHECK(x.stride(2) == 1 && x.stride(1) == x.size(2), what, " must have packed heads");
  TORCH_CHECK((quantized ? x.is_floating_point() : x.scalar_type() == cache.scalar_type()) && !x.is_cuda(), what,
              " must be a CPU tensor of the cache dtype (or floating point for an int8 cache)");
}

}  // namespace

// k, v: [T, Hkv, D] (rows may be strided, heads packed); caches: contiguous [Hkv, slots, D], or int8
// [Hkv, slots, D + 4]; slots: [T] int64.
void store_kv_(torch::Tensor k, torch::Tensor v, torch::Tensor k_cache, torch::Tensor v_cache, torch::Tensor slots) {
  TORCH_CHECK(k_cache.dim() == 3 && k_cache.sizes() == v_cache.sizes() && k_cache.is_contiguous() &&
                  v_cache.is_contiguous() && !k_cache.is_cuda() && k_cache.scalar_type() == v_cache.scalar_type(),
              "caches must be contiguous CPU [kv_heads, slots, row] of one dtype");
  check_source(k, k_cache, "k");
  check_source(v, v_cache, "v");
  TORCH_CHECK(k.scalar_type() == v.scalar_type(), "k and v must share one dtype");
  TORCH_CHECK(slots.dim() == 1 && slots.scalar_type() == torch::kInt64 && slots.is_contiguous() &&
                  slots.size(0) == k.size(0) && v.size(0) == k.size(0), "one int64 slot per token");
  const int64_t* sp = slots.data_ptr<int64_t>();
  for (int64_t t = 0; t < slots.size(0); ++t)
    TORCH_CHECK(sp[t] >= 0 && sp[t] < k_cache.size(1), "slot ", sp[t], " outside the cache");
  if (k_cache.scalar_type() == torch::kInt8) {
    store_rows_int8(k, k_cache, sp, k.size(0));
    store_rows_int8(v, v_cache, sp, v.size(0));
  } else {
    store_rows(k, k_cache, sp, k.size(0));
    store_rows(v, v_cache, sp, v.size(0));
  }
}
