// The whole W8A8 linear in one call for CPUs with AVX2 but no AVX512-VNNI (int8_gemm.cpp is the VNNI one; the
// same four functions, so the dispatcher and Int8Linear do not care which was built).
//
// Why not torch._int_mm: without VNNI oneDNN's int8 GEMM measured ~1.7 GOP/s on a 2-core AVX2 EPYC (2048^3),
// slower than bfloat16 there and ~100x slower than float32, so the int8 rung was unusable on such machines.
//
// Arithmetic, bit-identical to kernels/reference/int8_gemm.w8a8_linear: each row quantized by the shared
// finllm_int8::quantize_row to [-127, 127]. AVX2 has no signed-by-signed byte dot product; vpmaddubsw multiplies
// unsigned by signed bytes and adds pairs into saturating int16. So the activation goes in as |x| and its sign
// moves onto the weight (vpsignb: w * sign(x)); a pair sums to at most 2 * 127 * 127 = 32258 < 32767, so nothing
// saturates (weights are quantized to [-127, 127], never -128), and vpmaddwd against ones widens the pairs into
// exact int32 sums of 4 products. The sum is the exact int32 dot product; then float(acc) * w_scale * x_scale
// (+ bias), rounded once to the output dtype, like dequantize_rows.
//
// Packed layout (one int8 tensor): panels of 8 output columns; panel p holds, for each group q of 4 input channels,
// the 8 x 4 block W[8p + c][4q + r] at byte ((p * kq + q) * 8 + c) * 4 + r (zeros past N and K), so one 32-byte
// load feeds one vpmaddubsw.
#include "int8_gemm_api.h"
#include "int8_quant.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#if !(defined(FINLLM_SIMD_AVX512) && defined(__AVX512VNNI__)) && defined(__AVX2__)
#include <immintrin.h>

namespace {

constexpr int64_t kPanel = 8;  // output columns per vector
constexpr int kMR = 4;         // rows per register tile
constexpr int kNR = 2;         // panels per register tile: 8 accumulators, 2 weight vectors, 2 broadcasts, ones

struct Geometry {
  int64_t n, k, panels, kq;
  Geometry(int64_t n_, int64_t k_) : n(n_), k(k_), panels((n_ + kPanel - 1) / kPanel), kq((k_ + 3) / 4) {}
  int64_t panel_bytes() const { return kq * kPanel * 4; }
  int64_t total_bytes() const { return panels * panel_bytes(); }
};

// The activation tile of kMR rows: for each quad q, the rows' |x| quads then their signed quads (8 * kMR bytes).
constexpr int64_t kTileQuadBytes = 2 * 4 * kMR;

inline __m256i broadcast_quad(const int8_t* p) {
  int32_t quad;
  std::memcpy(&quad, p, sizeof(quad));
  return _mm256_set1_epi32(quad);
}

// acc += exact int32 sums of |a| * (w * sign(a)) over each lane's 4 bytes.
inline __m256i dot4(__m256i acc, __m256i a_abs, __m256i a_signed, __m256i w, __m256i ones) {
  const __m256i pairs = _mm256_maddubs_epi16(a_abs, _mm256_sign_epi8(w, a_signed));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
}

template <typename T>
inline void store_row(__m256i acc, const float* w_scale, const float* bias, float x_scale, T* out, int64_t cols) {
  __m256 t = _mm256_cvtepi32_ps(acc);
  t = _mm256_mul_ps(_mm256_mul_ps(t, _mm256_loadu_ps(w_scale)), _mm256_set1_ps(x_scale));
  if (bias != nullptr) t = _mm256_add_ps(t, _mm256_loadu_ps(bias));
  alignas(32) float tmp[kPanel];
  _mm256_store_ps(tmp, t);
  for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<T>(tmp[c]);  // c10's conversions round to nearest even
}

// One register tile: kMR rows x NR (<= kNR) panels. Named accumulators, as in int8_gemm.cpp, so they stay in
// registers.
template <typename T, int NR>
void run_tile(const int8_t* a, int64_t rows, const int8_t* b, const Geometry& g, const float* w_scale,
              const float* bias, const float* x_scale, T* out, int64_t ldo, int64_t cols) {
  const int64_t pb = g.panel_bytes();
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  for (int64_t q = 0; q < g.kq; ++q) {
    const int8_t* bq = b + q * kPanel * 4;
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq));
    const __m256i b1 = NR > 1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq + pb)) : b0;
    const int8_t* aq = a + q * kTileQuadBytes;
#define FINLLM_ROW(i)                                           \
  {                                                             \
    const __m256i aa = broadcast_quad(aq + (i) * 4);            \
    const __m256i as = broadcast_quad(aq + 4 * kMR + (i) * 4);  \
    c##i##0 = dot4(c##i##0, aa, as, b0, ones);                  \
    if (NR > 1) c##i##1 = dot4(c##i##1, aa, as, b1, ones);      \
  }
    FINLLM_ROW(0) FINLLM_ROW(1) FINLLM_ROW(2) FINLLM_ROW(3)
#undef FINLLM_ROW
  }
  const __m256i acc[kMR][kNR] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
  for (int j = 0; j < NR; ++j) {
    const int64_t c0 = j * kPanel;
    if (c0 >= cols) break;
    const int64_t w = std::min<int64_t>(kPanel, cols - c0);
    alignas(32) float ws[kPanel] = {}, bs[kPanel] = {};
    std::memcpy(ws, w_scale + c0, w * sizeof(float));
    if (bias != nullptr) std::memcpy(bs, bias + c0, w * sizeof(float));
    for (int64_t i = 0; i < rows; ++i)
      store_row<T>(acc[i][j], ws, bias != nullptr ? bs : nullptr, x_scale[i], out + i * ldo + c0, w);
  }
}

inline int64_t pack_offset(const Geometry& g, int64_t n, int64_t k) {
  return ((n / kPanel * g.kq + k / 4) * kPanel + n % kPanel) * 4 + k % 4;
}

template <typename T>
void gemm(const int8_t* a, int64_t m, const int8_t* packed, const Geometry& g, const float* w_scale,
          const float* bias, const float* x_scale, T* out) {
  const int64_t groups = (g.panels + kNR - 1) / kNR;
  // Column groups split over the threads; each runs down all the rows while its weight panels stay in cache.
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t grp = begin; grp < end; ++grp) {
      const int64_t p0 = grp * kNR, nr = std::min<int64_t>(kNR, g.panels - p0), c0 = p0 * kPanel;
      const int64_t cols = std::min(g.n - c0, nr * kPanel);
      const int8_t* b = packed + p0 * g.panel_bytes();
      for (int64_t r0 = 0; r0 < m; r0 += kMR) {
        const int64_t mr = std::min<int64_t>(kMR, m - r0);
        const int8_t* ar = a + (r0 / kMR) * g.kq * kTileQuadBytes;
        T* o = out + r0 * g.n + c0;
        const float* bs = bias != nullptr ? bias + c0 : nullptr;
        auto run = nr == 2 ? run_tile<T, 2> : run_tile<T, 1>;
        run(ar, mr, b, g, w_scale + c0, bs, x_scale + r0, o, g.n, cols);
      }
    }
  });
}

}  // namespace

bool has_int8_gemm() { return true; }

// qweight: int8 [N, K] in [-127, 127] -> the packed layout above (one int8 tensor).
torch::Tensor pack_int8_weight(torch::Tensor qweight) {
  auto w = finllm_int8_gemm::contiguous_weight(qweight);
  TORCH_CHECK(w.numel() == 0 || w.min().item<int8_t>() > -128,
              "the AVX2 int8 GEMM needs weights in [-127, 127] (symmetric quantization never gives -128)");
  const Geometry g(w.size(0), w.size(1));
  auto packed = torch::zeros({g.total_bytes()}, w.options());
  const int8_t* src = w.data_ptr<int8_t>();
  int8_t* dst = packed.data_ptr<int8_t>();
  at::parallel_for(0, g.n, 64, [&](int64_t begin, int64_t end) {  // rows write disjoint bytes
    for (int64_t n = begin; n < end; ++n)
      for (int64_t kk = 0; kk < g.k; ++kk) dst[pack_offset(g, n, kk)] = src[n * g.k + kk];
  });
  return packed;
}

// The [N, K] int8 weight back from its packed layout.
torch::Tensor unpack_int8_weight(torch::Tensor packed, int64_t n, int64_t k) {
  const Geometry g(n, k);
  return finllm_int8_gemm::unpack(packed, n, k, g.total_bytes(),
                                  [&](int64_t r, int64_t kk) { return pack_offset(g, r, kk); });
}

// x: [M, K] float32/bfloat16/float16, contiguous; packed from pack_int8_weight(qweight [N, K]); w_scale: float32
// [N]; bias: [N] or None. Returns [M, N] in x's dtype.
torch::Tensor int8_linear(torch::Tensor x, torch::Tensor packed, int64_t n, torch::Tensor w_scale,
                          c10::optional<torch::Tensor> bias) {
  const torch::Tensor bias_f = finllm_int8_gemm::check_linear_args(
      x, packed, n, w_scale, bias, [n](int64_t k) { return Geometry(n, k).total_bytes(); });
  const int64_t m = x.size(0), k = x.size(1);
  const Geometry g(n, k);
  auto out = torch::empty({m, n}, x.options());
  // Activations as row tiles (see kTileQuadBytes). Channels past K are 0 (their weights are 0 too); the rows
  // past M in the last tile are zeroed, though their outputs are never stored.
  const int64_t tiles = (m + kMR - 1) / kMR;
  const int64_t tile_bytes = g.kq * kTileQuadBytes;
  // Uninitialised: every byte of rows < M is written below (a zero-filled vector cost a pass over the buffer).
  std::unique_ptr<int8_t[]> a(new int8_t[static_cast<size_t>(std::max<int64_t>(tiles * tile_bytes, 1))]);
  if (m % kMR != 0) std::memset(a.get() + (tiles - 1) * tile_bytes, 0, static_cast<size_t>(tile_bytes));
  std::vector<float> x_scale(static_cast<size_t>(m));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "int8_linear", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    at::parallel_for(0, m, 16, [&](int64_t begin, int64_t end) {
      std::vector<float> tmp(k);
      // the row and its |row| padded to whole 32-byte vectors; bytes past K stay 0
      const int64_t padded = (g.kq * 4 + 31) / 32 * 32;
      std::vector<int8_t> row(padded, 0), row_abs(padded, 0);
      for (int64_t i = begin; i < end; ++i) {
        x_scale[i] = finllm_int8::quantize_row(xp + i * k, k, tmp.data(), row.data());
        for (int64_t c = 0; c < padded; c += 32) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.data() + c));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(row_abs.data() + c), _mm256_abs_epi8(v));  // |x| <= 127
        }
        int8_t* tile = a.get() + (i / kMR) * tile_bytes + (i % kMR) * 4;
        for (int64_t q = 0; q < g.kq; ++q) {  // one quad of |x| and one of x per 32-byte group
          std::memcpy(tile + q * kTileQuadBytes, row_abs.data() + 4 * q, 4);
          std::memcpy(tile + q * kTileQuadBytes + 4 * kMR, row.data() + 4 * q, 4);
        }
      }
    });
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16> ||
                  std::is_same_v<scalar_t, c10::Half>) {
      gemm<scalar_t>(a.get(), m, packed.data_ptr<int8_t>(), g, w_scale.data_ptr<float>(),
                     bias.has_value() ? bias_f.data_ptr<float>() : nullptr, x_scale.data(), out.data_ptr<scalar_t>());
    } else {
      TORCH_CHECK(false, "int8_linear: float32, bfloat16 or float16 activations");
    }
  });
  return out;
}

#endif
