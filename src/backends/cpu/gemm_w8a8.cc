// W8A8 layout (repack from Q8_0, row reads), the scalar reference kernels and the dispatch; the
// layout and the numerics are described in gemm_w8a8.h.
#include "backends/cpu/gemm_w8a8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/isa.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

constexpr int64_t kBlock = 32;
constexpr size_t kBlockBytes = 34;  // Q8_0: f16 d, then 32 int8 codes

size_t row_size(int64_t k) { return static_cast<size_t>(k / kBlock) * kBlockBytes; }

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// One Q8_0 row as int8 codes and an f16 scale shared by the whole row.
void row_codes(const uint8_t* src, int64_t k, int8_t* q, uint16_t* d) {
  const int64_t nb = k / kBlock;
  bool shared = true;
  const uint16_t d0 = load_u16(src);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = src + b * kBlockBytes;
    shared = shared && load_u16(blk) == d0;
    std::memcpy(q + b * kBlock, blk + 2, kBlock);
  }
  bool in_range = true;
  for (int64_t i = 0; i < k; ++i) in_range = in_range && q[i] != -128;
  if (shared && in_range) {
    *d = d0;
    return;
  }
  // Blocks with their own scales (not a W8A8 file's row): one scale for the row, as the quantizer
  // makes it.
  std::vector<float> x(static_cast<size_t>(k));
  for (int64_t b = 0; b < nb; ++b) {
    const float db = f16_to_f32(load_u16(src + b * kBlockBytes));
    for (int64_t i = 0; i < kBlock; ++i)
      x[b * kBlock + i] = db * static_cast<float>(q[b * kBlock + i]);
  }
  std::vector<uint8_t> row(row_size(k));
  quantize_row_w8a8(x.data(), row.data(), k);
  *d = load_u16(row.data());
  for (int64_t b = 0; b < nb; ++b)
    std::memcpy(q + b * kBlock, row.data() + b * kBlockBytes + 2, kBlock);
}

// S = sum q_w * q_x over one row (codes offset by 128) and one token.
int32_t row_sum(const uint8_t* codes, const int8_t* x, int64_t k) {
  int32_t s = 0;
  for (int64_t i = 0; i < k; ++i) s += (static_cast<int32_t>(codes[i]) - 128) * x[i];
  return s;
}

}  // namespace

void quantize_row_w8a8(const float* x, void* q8_0, int64_t k) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t d = f32_to_f16(amax / 127.0f);
  const float ds = f16_to_f32(d);
  const float inv = ds > 0.0f ? 1.0f / ds : 0.0f;
  auto* out = static_cast<uint8_t*>(q8_0);
  for (int64_t b = 0; b < k / kBlock; ++b) {
    uint8_t* blk = out + b * kBlockBytes;
    std::memcpy(blk, &d, 2);
    for (int64_t i = 0; i < kBlock; ++i) {
      const float v = std::min(std::max(x[b * kBlock + i] * inv, -127.0f), 127.0f);
      blk[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(v)));
    }
  }
}

bool w8a8_fits(int64_t rows, int64_t k) { return rows >= kW8A8Rows && k >= 64 && k % kBlock == 0; }

void repack_w8a8(const void* src, void* dst, int64_t rows, int64_t k, float act_scale) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const size_t rb = row_size(k);
  std::vector<int8_t> q(static_cast<size_t>(k));
  const int64_t full = rows / kW8A8Rows * kW8A8Rows;
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t scale = 0;
    row_codes(s + r * rb, k, q.data(), &scale);
    if (r < full) {
      uint8_t* group = d + (r / kW8A8Rows) * kW8A8Rows * rb;
      const int64_t lane = r % kW8A8Rows;
      for (int64_t i = 0; i < k; ++i)
        group[(i / 4) * 64 + lane * 4 + i % 4] = static_cast<uint8_t>(q[i] + 128);
      std::memcpy(group + 16 * k + 2 * lane, &scale, 2);
      if (lane == 0) std::memcpy(group + 16 * k + 32, &act_scale, 4);
    } else {
      uint8_t* row = d + r * rb;
      for (int64_t i = 0; i < k; ++i) row[i] = static_cast<uint8_t>(q[i] + 128);
      std::memcpy(row + k, &scale, 2);
    }
  }
}

void dequantize_row_w8a8(const uint8_t* w, int64_t rows, int64_t k, int64_t r, float* out) {
  const size_t rb = row_size(k);
  const int64_t full = rows / kW8A8Rows * kW8A8Rows;
  if (r >= full) {
    const uint8_t* row = w + r * rb;
    const float d = f16_to_f32(load_u16(row + k));
    for (int64_t i = 0; i < k; ++i) out[i] = d * static_cast<float>(static_cast<int>(row[i]) - 128);
    return;
  }
  const uint8_t* group = w + (r / kW8A8Rows) * kW8A8Rows * rb;
  const int64_t lane = r % kW8A8Rows;
  const float d = f16_to_f32(load_u16(group + 16 * k + 2 * lane));
  for (int64_t i = 0; i < k; ++i)
    out[i] = d * static_cast<float>(static_cast<int>(group[(i / 4) * 64 + lane * 4 + i % 4]) - 128);
}

float w8a8_act_scale(const uint8_t* w, int64_t k) {
  float s;
  std::memcpy(&s, w + 16 * k + 32, 4);
  return s;
}

void quantize_act_w8a8_ref(const float* x, int64_t k, float static_scale, int8_t* q, float* scale,
                           int32_t* sum) {
  float s = static_scale, inv = 0.0f;
  if (s > 0.0f) {
    inv = 1.0f / s;
  } else {
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
    s = amax / 127.0f;
    inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  }
  int32_t total = 0;
  for (int64_t i = 0; i < k; ++i) {
    // Clamped, then rounded half to even: what the AVX2 version's max, min and cvtps do.
    const float v = std::min(std::max(x[i] * inv, -127.0f), 127.0f);
    q[i] = static_cast<int8_t>(std::nearbyint(v));
    total += q[i];
  }
  *scale = s;
  *sum = total;
}

int64_t w8a8_units(int64_t rows) { return rows / kW8A8Rows + (rows % kW8A8Rows != 0 ? 1 : 0); }

void gemm_w8a8_tail(const W8A8Problem& p) {
  const size_t rb = row_size(p.k);
  for (int64_t r = p.rows / kW8A8Rows * kW8A8Rows; r < p.rows; ++r) {
    const uint8_t* row = p.w + r * rb;
    const float d = f16_to_f32(load_u16(row + p.k));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      const int32_t s = row_sum(row, p.xq + t * p.x_stride, p.k);
      p.y[t * p.y_stride + r] = static_cast<float>(s) * (d * p.xs[t]);
    }
  }
}

void gemm_w8a8_ref(const W8A8Problem& p, int64_t u0, int64_t u1) {
  const size_t rb = row_size(p.k);
  const int64_t groups = p.rows / kW8A8Rows;
  std::vector<uint8_t> codes(static_cast<size_t>(p.k));
  for (int64_t g = u0; g < std::min(u1, groups); ++g) {
    const uint8_t* group = p.w + g * kW8A8Rows * rb;
    for (int64_t lane = 0; lane < kW8A8Rows; ++lane) {
      for (int64_t i = 0; i < p.k; ++i) codes[i] = group[(i / 4) * 64 + lane * 4 + i % 4];
      const float d = f16_to_f32(load_u16(group + 16 * p.k + 2 * lane));
      for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t s = row_sum(codes.data(), p.xq + t * p.x_stride, p.k);
        p.y[t * p.y_stride + g * kW8A8Rows + lane] = static_cast<float>(s) * (d * p.xs[t]);
      }
    }
  }
  if (u1 > groups) gemm_w8a8_tail(p);
}

W8A8QuantizeFn quantize_act_w8a8() {
  return avx2_active() ? quantize_act_w8a8_avx2 : quantize_act_w8a8_ref;
}

W8A8GemmFn gemm_w8a8() {
  if (avx512_active()) return gemm_w8a8_vnni;
  return avx2_active() ? gemm_w8a8_avx2 : gemm_w8a8_ref;
}

}  // namespace nexus::cpu
