// torch's float sum of a contiguous row, in its exact order, for kernels that must reproduce a reference mean
// bit for bit (RMSNorm's variance).
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace finllm_sum {

// torch's float sum of a contiguous row (aten SumKernel: vectorized_inner_sum -> row_sum -> multi_row_sum, which
// torch dispatches to its 8-lane AVX2 build), lane for lane: four interleaved vector accumulators with its
// cascade levels, then the lanes in order. RMSNorm's mean goes through it; matching its order keeps the norm
// bit-identical to the reference (checked against torch for many row sizes).
inline float torch_row_sum(const float* in, int64_t size0) {
  constexpr int64_t W = 8, kRows = 4, kLevels = 4;
  const int64_t vec_size = size0 / W;
  const int64_t size_ilp = vec_size / kRows;
  int64_t ceil_log2 = 0;
  while ((int64_t{1} << ceil_log2) < size_ilp) ++ceil_log2;
  const int64_t level_power = std::max<int64_t>(4, ceil_log2 / kLevels);
  const int64_t level_step = int64_t{1} << level_power, level_mask = level_step - 1;
  __m256 acc[kLevels][kRows];
  for (auto& lv : acc)
    for (auto& a : lv) a = _mm256_setzero_ps();
  auto vec = [&](int64_t v) { return _mm256_loadu_ps(in + v * W); };
  int64_t i = 0;
  while (i + level_step <= size_ilp) {
    for (int64_t j = 0; j < level_step; ++j, ++i)
      for (int64_t k = 0; k < kRows; ++k) acc[0][k] = _mm256_add_ps(acc[0][k], vec(i * kRows + k));
    for (int64_t j = 1; j < kLevels; ++j) {
      for (int64_t k = 0; k < kRows; ++k) {
        acc[j][k] = _mm256_add_ps(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = _mm256_setzero_ps();
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size_ilp; ++i)
    for (int64_t k = 0; k < kRows; ++k) acc[0][k] = _mm256_add_ps(acc[0][k], vec(i * kRows + k));
  for (int64_t j = 1; j < kLevels; ++j)
    for (int64_t k = 0; k < kRows; ++k) acc[0][k] = _mm256_add_ps(acc[0][k], acc[j][k]);
  for (int64_t v = size_ilp * kRows; v < vec_size; ++v) acc[0][0] = _mm256_add_ps(acc[0][0], vec(v));
  for (int64_t k = 1; k < kRows; ++k) acc[0][0] = _mm256_add_ps(acc[0][0], acc[0][k]);
  float total = 0.f;
  for (int64_t t = vec_size * W; t < size0; ++t) total += in[t];
  alignas(32) float lanes[W];
  _mm256_store_ps(lanes, acc[0][0]);
  for (int64_t l = 0; l < W; ++l) total += lanes[l];
  return total;
}

}  // namespace finllm_sum

#endif
