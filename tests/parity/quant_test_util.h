// Helpers shared by the quantization and matmul parity tests: the list of computable dtypes,
// deterministic test data and double-precision references.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/quant.h"
#include "nexus/dtype.h"
#include "nexus/status.h"

namespace nexus::test {

// Every dtype with CPU kernels.
inline const std::vector<DType>& computable_dtypes() {
  static const std::vector<DType> all = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                                         DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                                         DType::kQ8_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                                         DType::kQ5_K, DType::kQ6_K, DType::kQ8_K};
  return all;
}

inline std::string dtype_test_name(DType t) { return std::string(dtype_name(t)); }

// Gaussian values; with `outliers`, one in 64 is scaled by 8, like real weights and activations.
inline std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f,
                                        bool outliers = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng) * (outliers && pick(rng) == 0 ? 8.0f : 1.0f);
  return v;
}

// Random bytes for n elements of type t, with every f16 scale field overwritten by a finite value
// of moderate size (random scale bits would mostly give inf/NaN/huge values). Exercises every code
// bit pattern of the layout, including ones our quantizers never produce.
inline std::vector<uint8_t> random_blocks(DType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> q(row_bytes(t, n));
  for (auto& b : q) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(0.001f, 0.1f);
  auto scale = [&] { return (rng() & 1 ? -1.0f : 1.0f) * mag(rng); };
  auto put_half = [&](size_t off) {
    const uint16_t h = f32_to_f16(scale());
    std::memcpy(&q[off], &h, 2);
  };
  const DTypeTraits& tr = traits(t);
  const size_t nb = q.size() / tr.block_bytes;
  for (size_t i = 0; i < nb; ++i) {
    const size_t o = i * tr.block_bytes;
    switch (t) {
      case DType::kF32: {
        const float f = scale() * 100.0f;
        std::memcpy(&q[o], &f, 4);
        break;
      }
      case DType::kF16:
        put_half(o);
        break;
      case DType::kBF16: {
        const uint16_t h = f32_to_bf16(scale() * 100.0f);
        std::memcpy(&q[o], &h, 2);
        break;
      }
      case DType::kQ4_0:
      case DType::kQ5_0:
      case DType::kQ8_0:
        put_half(o);
        break;
      case DType::kQ4_1:
      case DType::kQ5_1:
      case DType::kQ8_1:
      case DType::kQ4_K:
      case DType::kQ5_K:
        put_half(o);
        put_half(o + 2);
        break;
      case DType::kQ6_K:
        put_half(o + 208);
        break;
      case DType::kQ8_K: {
        const float d = scale();
        std::memcpy(&q[o], &d, 4);
        for (int g = 0; g < 16; ++g) {  // keep the group sums consistent with the codes
          int16_t s = 0;
          for (int l = 0; l < 16; ++l)
            s = static_cast<int16_t>(s + static_cast<int8_t>(q[o + 4 + 16 * g + l]));
          std::memcpy(&q[o + 260 + 2 * g], &s, 2);
        }
        break;
      }
      default:
        break;
    }
  }
  return q;
}

// `rows` rows of type t from the quantizer, each from its own random data (so its own scales).
inline std::vector<uint8_t> quantized_rows(DType t, int64_t rows, int64_t k, uint32_t seed) {
  const size_t rb = row_bytes(t, k);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    cpu::quantize_row(t, random_floats(k, seed + static_cast<uint32_t>(r)).data(),
                      w.data() + r * rb, k);
  return w;
}

inline std::vector<uint8_t> quantize(DType t, const std::vector<float>& x,
                                     cpu::Isa isa = cpu::active_isa()) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  cpu::kernels(t, isa).quantize(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

inline std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t n,
                                     cpu::Isa isa = cpu::active_isa()) {
  std::vector<float> y(static_cast<size_t>(n));
  cpu::kernels(t, isa).dequantize(q.data(), y.data(), n);
  return y;
}

// Sum of a[i] * b[i] and of |a[i] * b[i]| in double.
struct DotRef {
  double dot = 0.0;
  double abs = 0.0;
};
inline DotRef dot_ref(const float* a, const float* b, int64_t n) {
  DotRef r;
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(a[i]) * b[i];
    r.dot += p;
    r.abs += std::fabs(p);
  }
  return r;
}

inline double norm2(const float* a, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * a[i];
  return std::sqrt(s);
}

// Bitwise float equality that treats any two NaNs as equal.
inline bool same_float(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

}  // namespace nexus::test
