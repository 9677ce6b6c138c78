// The whole W8A8 linear in one call for CPUs with AVX512-VNNI: quantize the activation rows, multiply by int8
// weights packed once at load, and scale the int32 sums straight into the output.
//
// Why not torch._int_mm (oneDNN): it re-lays the [N, K] weight out for VNNI and sums its columns on every call,
// and at the few rows of a decode step (1-64) that per-call work and its threading dominate: in situ it ran at
// 170-480 GOPS there against ~800 at 256 rows. Packing here happens once (pack_int8_weight), and a call writes the
// output in the activation dtype without the int32 [M, N] intermediate.
//
// Arithmetic, bit-identical to kernels/reference/int8_gemm.w8a8_linear: each row quantized by the shared
// finllm_int8::quantize_row; vpdpbusd multiplies unsigned by signed bytes, so rows are stored as x + 128 and
// 128 * (column sum of W) is subtracted afterwards, which gives the exact int32 sum of x * w; then
// float(acc) * w_scale * x_scale (+ bias), rounded once to the output dtype, like dequantize_rows.
//
// Packed layout (one int8 tensor): panels of 16 output columns; panel p holds, for each group q of 4 input
// channels, the 16 x 4 block W[16p + c][4q + r] at byte ((p * kq + q) * 16 + c) * 4 + r (zeros past N and K), so
// one 64-byte load feeds one vpdpbusd; after the panels, 128 * column sum as int32 for each padded column.
#include "int8_gemm_api.h"
#include "int8_quant.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(FINLLM_SIMD_AVX512) && defined(__AVX512VNNI__)
#define FINLLM_INT8_GEMM 1
namespace {

constexpr int64_t kPanel = 16;  // output columns per vector
constexpr int kMR = 8;          // rows per register tile
constexpr int kNR = 3;          // panels per register tile: 24 accumulators + 3 weight vectors + 1 broadcast
constexpr int32_t kOffset = 128;

struct Geometry {
  int64_t n, k, panels, kq;
  // Columns padded to whole panels, input channels to whole quads (zero weights).
  Geometry(int64_t n_, int64_t k_) : n(n_), k(k_), panels((n_ + kPanel - 1) / kPanel), kq((k_ + 3) / 4) {}
  int64_t panel_bytes() const { return kq * 64; }
  int64_t weight_bytes() const { return panels * panel_bytes(); }
  int64_t total_bytes() const { return weight_bytes() + panels * kPanel * static_cast<int64_t>(sizeof(int32_t)); }
};

// out rows [rows] x columns [16 * kNR, cut to `cols`]: (acc - comp) as float * w_scale * x_scale (+ bias).
template <typename T>
inline void store_tile(const __m512i (&acc)[kMR][kNR], int64_t rows, const int32_t* comp, const float* w_scale,
                       const float* bias, const float* x_scale, T* out, int64_t ldo, int64_t cols) {
  for (int j = 0; j < kNR; ++j) {
    const int64_t c0 = j * kPanel;
    if (c0 >= cols) break;
    const __mmask16 m = finllm_simd::tail_mask(cols - c0);
    const __m512i cv = _mm512_loadu_si512(comp + c0);
    const __m512 ws = _mm512_maskz_loadu_ps(m, w_scale + c0);
    const __m512 bv = bias != nullptr ? _mm512_maskz_loadu_ps(m, bias + c0) : _mm512_setzero_ps();
    for (int64_t i = 0; i < rows; ++i) {
      __m512 t = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][j], cv));
      t = _mm512_mul_ps(_mm512_mul_ps(t, ws), _mm512_set1_ps(x_scale[i]));
      if (bias != nullptr) t = _mm512_add_ps(t, bv);
      finllm_simd::store16(out + i * ldo + c0, t, m);
    }
  }
}

inline __m512i broadcast_quad(const uint8_t* p) {
  int32_t quad;
  std::memcpy(&quad, p, sizeof(quad));
  return _mm512_set1_epi32(quad);
}

// One register tile, kMR rows x NR (<= kNR) panels: up to 24 accumulators, 3 weight vectors and a broadcast per
// step of 4 input channels. Named variables, not an array: GCC 12 kept an accumulator array in memory (or copied
// every accumulator each step), which halved the rate.
template <typename T, int NR>
void run_tile(const uint8_t* a, int64_t rows, const int8_t* b, const Geometry& g, const int32_t* comp,
              const float* w_scale, const float* bias, const float* x_scale, T* out, int64_t ldo, int64_t cols) {
  const int64_t pb = g.panel_bytes();
#define FINLLM_ACC(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = c##i##0, c##i##2 = c##i##0;
  FINLLM_ACC(0) FINLLM_ACC(1) FINLLM_ACC(2) FINLLM_ACC(3) FINLLM_ACC(4) FINLLM_ACC(5) FINLLM_ACC(6) FINLLM_ACC(7)
#undef FINLLM_ACC
  for (int64_t q = 0; q < g.kq; ++q) {
    const int8_t* bq = b + q * 64;
    const __m512i b0 = _mm512_loadu_si512(bq);
    const __m512i b1 = NR > 1 ? _mm512_loadu_si512(bq + pb) : b0;
    const __m512i b2 = NR > 2 ? _mm512_loadu_si512(bq + 2 * pb) : b0;
#define FINLLM_ROW(i)                                          \
  {                                                            \
    const __m512i av = broadcast_quad(a + q * 32 + (i) * 4);   \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0);            \
    if (NR > 1) c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1); \
    if (NR > 2) c##i##2 = _mm512_dpbusd_epi32(c##i##2, av, b2); \
  }
    FINLLM_ROW(0) FINLLM_ROW(1) FINLLM_ROW(2) FINLLM_ROW(3) FINLLM_ROW(4) FINLLM_ROW(5) FINLLM_ROW(6) FINLLM_ROW(7)
#undef FINLLM_ROW
  }
  const __m512i acc[kMR][kNR] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22}, {c30, c31, c32},
                                 {c40, c41, c42}, {c50, c51, c52}, {c60, c61, c62}, {c70, c71, c72}};
  store_tile<T>(acc, rows, comp, w_scale, bias, x_scale, out, ldo, cols);
}

inline int64_t pack_offset(const Geometry& g, int64_t n, int64_t k) {
  return ((n / kPanel * g.kq + k / 4) * kPanel + n % kPanel) * 4 + k % 4;
}

template <typename T>
void gemm(const uint8_t* a, int64_t m, const int8_t* packed, const Geometry& g, const float* w_scale,
          const float* bias, const float* x_scale, T* out) {
  const int32_t* comp = reinterpret_cast<const int32_t*>(packed + g.weight_bytes());
  const int64_t groups = (g.panels + kNR - 1) / kNR;
  // Column groups split over the threads; each runs down all the rows while its weight panels stay in cache.
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t grp = begin; grp < end; ++grp) {
      const int64_t p0 = grp * kNR, nr = std::min<int64_t>(kNR, g.panels - p0), c0 = p0 * kPanel;
      const int64_t cols = std::min(g.n - c0, nr * kPanel);
      const int8_t* b = packed + p0 * g.panel_bytes();
      for (int64_t r0 = 0; r0 < m; r0 += kMR) {
        const int64_t mr = std::min<int64_t>(kMR, m - r0);
        const uint8_t* ar = a + r0 * g.kq * 4;  // tile r0 / kMR: kMR rows x kq quads
        T* o = out + r0 * g.n + c0;
        const float* bs = bias != nullptr ? bias + c0 : nullptr;
        auto run = nr == 3 ? run_tile<T, 3> : nr == 2 ? run_tile<T, 2> : run_tile<T, 1>;
        run(ar, mr, b, g, comp + c0, w_scale + c0, bs, x_scale + r0, o, g.n, cols);
      }
    }
  });
}

}  // namespace

bool has_int8_gemm() { return true; }

// qweight: int8 [N, K] -> the packed layout above (one int8 tensor).
torch::Tensor pack_int8_weight(torch::Tensor qweight) {
  auto w = finllm_int8_gemm::contiguous_weight(qweight);
  const Geometry g(w.size(0), w.size(1));
  auto packed = torch::zeros({g.total_bytes()}, w.options());
  const int8_t* src = w.data_ptr<int8_t>();
  int8_t* dst = packed.data_ptr<int8_t>();
  int32_t* comp = reinterpret_cast<int32_t*>(dst + g.weight_bytes());
  at::parallel_for(0, g.n, 64, [&](int64_t begin, int64_t end) {  // rows write disjoint bytes
    for (int64_t n = begin; n < end; ++n) {
      int32_t sum = 0;
      for (int64_t kk = 0; kk < g.k; ++kk) {
        const int8_t v = src[n * g.k + kk];
        dst[pack_offset(g, n, kk)] = v;
        sum += v;
      }
      comp[n] = kOffset * sum;
    }
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
  // Activations as row tiles: for each tile of kMR rows and each quad of input channels, the rows' 4 bytes side
  // by side (32 bytes), so a tile's broadcasts read one stream. Rows past M and channels past K stay 0: their
  // rows are never stored and their weights are 0.
  const int64_t m_pad = (m + kMR - 1) / kMR * kMR;
  std::vector<uint8_t> a(static_cast<size_t>(m_pad * g.kq * 4), 0);
  std::vector<float> x_scale(static_cast<size_t>(m));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "int8_linear", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    at::parallel_for(0, m, 16, [&](int64_t begin, int64_t end) {
      std::vector<float> tmp(k);
      std::vector<int8_t> row(g.kq * 4, 0);
      for (int64_t i = begin; i < end; ++i) {
        x_scale[i] = finllm_int8::quantize_row(xp + i * k, k, tmp.data(), row.data());
        uint8_t* tile = a.data() + (i / kMR) * g.kq * 4 * kMR + (i % kMR) * 4;
        for (int64_t q = 0; q < g.kq; ++q) {  // x + 128 as unsigned bytes is x ^ 0x80 in two's complement
          uint32_t quad;
          std::memcpy(&quad, row.data() + 4 * q, sizeof(quad));
          quad ^= 0x80808080u;
          if (4 * q + 4 > k) quad &= (1u << (8 * (k - 4 * q))) - 1u;  // channels past K: 0
          std::memcpy(tile + q * 4 * kMR, &quad, sizeof(quad));
        }
      }
    });
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16> ||
                  std::is_same_v<scalar_t, c10::Half>) {
      gemm<scalar_t>(a.data(), m, packed.data_ptr<int8_t>(), g, w_scale.data_ptr<float>(),
                     bias.has_value() ? bias_f.data_ptr<float>() : nullptr, x_scale.data(), out.data_ptr<scalar_t>());
    } else {
      TORCH_CHECK(false, "int8_linear: float32, bfloat16 or float16 activations");
    }
  });
  return out;
}

#elif !defined(__AVX2__)  // neither VNNI nor AVX2 (int8_gemm_avx2.cpp): the dispatcher keeps torch._int_mm

bool has_int8_gemm() { return false; }
torch::Tensor pack_int8_weight(torch::Tensor) { TORCH_CHECK(false, "pack_int8_weight needs AVX512-VNNI or AVX2"); }
torch::Tensor unpack_int8_weight(torch::Tensor, int64_t, int64_t) {
  TORCH_CHECK(false, "unpack_int8_weight needs AVX512-VNNI or AVX2");
}
torch::Tensor int8_linear(torch::Tensor, torch::Tensor, int64_t, torch::Tensor, c10::optional<torch::Tensor>) {
  TORCH_CHECK(false, "int8_linear needs AVX512-VNNI or AVX2");
}

#endif
