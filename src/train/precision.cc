// Precision names, the rounding front-ends (split over the pool, AVX2 or scalar) and the loss
// scaler.
#include "nexus/train/precision.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "nexus/core/thread_pool.h"
#include "nexus/dtype.h"
#include "train/train_parallel.h"

namespace nexus::train {

using par::use_avx2;

namespace {

// Below this many elements a pass runs on the calling thread only.
constexpr int64_t kMinPerThread = 1 << 15;

template <typename Fn>
void split(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (!pool || pool->size() == 1 || n < 2 * kMinPerThread) {
    fn(int64_t{0}, n);
    return;
  }
  pool->parallel_for(n, fn, kMinPerThread);
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kBF16:
      return "bf16";
    case Precision::kF16:
      return "f16";
    default:
      return "f32";
  }
}

Result<Precision> parse_precision(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f32" || s == "fp32") return Precision::kF32;
  if (s == "bf16") return Precision::kBF16;
  if (s == "f16" || s == "fp16") return Precision::kF16;
  return Status::error("unknown precision '" + std::string(name) + "' (use f32, bf16 or f16)");
}

void round_to(Precision p, float* x, int64_t n, ThreadPool* pool) {
  round_copy(p, x, x, n, pool);
}

void round_copy(Precision p, const float* x, float* y, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.round", 8 * n, 0);
  if (p == Precision::kF32) {
    if (x != y) std::copy(x, x + n, y);
    return;
  }
  split(pool, n, [&](int64_t b, int64_t e) {
    (use_avx2() ? kern::round_avx2 : kern::round_scalar)(p, x + b, y + b, e - b);
  });
}

void round_pack(Precision p, float* x, uint16_t* h, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.round_pack", 10 * n, 0);
  NEXUS_CHECK(p != Precision::kF32, "[precision] round_pack needs bf16 or f16");
  split(pool, n, [&](int64_t b, int64_t e) {
    (use_avx2() ? kern::round_pack_avx2 : kern::round_pack_scalar)(p, x + b, h + b, e - b);
  });
}

void unpack(Precision p, const uint16_t* h, float* x, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.unpack", 6 * n, 0);
  NEXUS_CHECK(p != Precision::kF32, "[precision] unpack needs bf16 or f16");
  split(pool, n, [&](int64_t b, int64_t e) {
    (use_avx2() ? kern::unpack_avx2 : kern::unpack_scalar)(p, h + b, x + b, e - b);
  });
}

bool LossScaler::update(bool finite) {
  if (!opts_.dynamic) {
    if (!finite) ++skipped_;
    return finite;
  }
  if (!finite) {
    scale_ *= opts_.backoff;
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= opts_.growth_interval) {
    scale_ *= opts_.growth;
    good_ = 0;
  }
  return true;
}

namespace kern {

namespace {
uint16_t encode(Precision p, float v) { return p == Precision::kBF16 ? f32_to_bf16(v) : f32_to_f16(v); }
float decode(Precision p, uint16_t h) { return p == Precision::kBF16 ? bf16_to_f32(h) : f16_to_f32(h); }
}  // namespace

void round_scalar(Precision p, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = decode(p, encode(p, x[i]));
}

void round_pack_scalar(Precision p, float* x, uint16_t* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    h[i] = encode(p, x[i]);
    x[i] = decode(p, h[i]);
  }
}

void unpack_scalar(Precision p, const uint16_t* h, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = decode(p, h[i]);
}

}  // namespace kern
}  // namespace nexus::train
