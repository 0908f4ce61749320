// TEMPORARY (lead): minimal F32/F16/BF16/Q8_0 until the quant branch lands.
#include <cmath>
#include <cstring>
#include "backends/cpu/quant.h"
#include "nexus/status.h"
namespace nexus::cpu {
struct BQ8 { uint16_t d; int8_t q[32]; };
void quantize_row(DType t, const float* x, void* y, int64_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(y, x, n * 4); return;
    case DType::kF16: for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(y)[i] = f32_to_f16(x[i]); return;
    case DType::kBF16: for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(y)[i] = f32_to_bf16(x[i]); return;
    case DType::kQ8_0: {
      auto* b = static_cast<BQ8*>(y);
      for (int64_t k = 0; k < n / 32; ++k) {
        float amax = 0; for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[k*32+j]));
        float d = amax / 127; float id = d ? 1 / d : 0; b[k].d = f32_to_f16(d);
        for (int j = 0; j < 32; ++j) b[k].q[j] = (int8_t)std::lround(x[k*32+j] * id);
      }
      return;
    }
    default: throw Error("tmp quantize");
  }
}
void dequantize_row(DType t, const void* x, float* y, int64_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(y, x, n * 4); return;
    case DType::kF16: for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(static_cast<const uint16_t*>(x)[i]); return;
    case DType::kBF16: for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(static_cast<const uint16_t*>(x)[i]); return;
    case DType::kQ8_0: { auto* b = static_cast<const BQ8*>(x);
      for (int64_t k = 0; k < n / 32; ++k) { float d = f16_to_f32(b[k].d); for (int j = 0; j < 32; ++j) y[k*32+j] = d * b[k].q[j]; } return; }
    default: throw Error("tmp dequantize");
  }
}
DType vec_dot_type(DType) { return DType::kF32; }
float vec_dot(DType t, int64_t n, const void* w, const void* x) {
  const float* xf = static_cast<const float*>(x); float s = 0;
  if (t == DType::kF32) { const float* wf = static_cast<const float*>(w); for (int64_t i = 0; i < n; ++i) s += wf[i] * xf[i]; return s; }
  float buf[4096]; for (int64_t o = 0; o < n; o += 4096) { int64_t m = std::min<int64_t>(4096, n - o);
    dequantize_row(t, static_cast<const uint8_t*>(w) + row_bytes(t, o), buf, m); for (int64_t i = 0; i < m; ++i) s += buf[i] * xf[o+i]; }
  return s;
}
}
