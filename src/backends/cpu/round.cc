// Rounding to bf16 / fp16: the scalar reference kernels and the variant tables, which split the
// elements over the pool (every element on its own, so the split never changes a result).
#include "backends/cpu/round.h"

#include "backends/cpu/isa.h"
#include "nexus/core/thread_pool.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

uint16_t encode(Precision p, float v) {
  return p == Precision::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
}
float decode(Precision p, uint16_t h) {
  return p == Precision::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Below this many elements a pass runs on the calling thread only.
constexpr int64_t kMinPerThread = 1 << 15;

template <typename Fn>
void split(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (!pool || pool->size() == 1 || n < 2 * kMinPerThread) return fn(int64_t{0}, n);
  pool->parallel_for(n, fn, kMinPerThread);
}

template <void (*kernel)(Precision, const float*, float*, int64_t)>
void round_run(const RoundArgs& a, ThreadPool* pool) {
  split(pool, a.n, [&](int64_t b, int64_t e) { kernel(a.p, a.x + b, a.y + b, e - b); });
}
template <void (*kernel)(Precision, float*, uint16_t*, int64_t)>
void round_pack_run(const RoundPackArgs& a, ThreadPool* pool) {
  split(pool, a.n, [&](int64_t b, int64_t e) { kernel(a.p, a.x + b, a.h + b, e - b); });
}
template <void (*kernel)(Precision, const uint16_t*, float*, int64_t)>
void unpack_run(const UnpackArgs& a, ThreadPool* pool) {
  split(pool, a.n, [&](int64_t b, int64_t e) { kernel(a.p, a.h + b, a.x + b, e - b); });
}

const KernelVariant<RoundArgs> kRound[] = {{"avx2", avx2_active, round_run<round_avx2>},
                                           {"scalar", always_available, round_run<round_scalar>}};
const KernelVariant<RoundPackArgs> kRoundPack[] = {
    {"avx2", avx2_active, round_pack_run<round_pack_avx2>},
    {"scalar", always_available, round_pack_run<round_pack_scalar>}};
const KernelVariant<UnpackArgs> kUnpack[] = {
    {"avx2", avx2_active, unpack_run<unpack_avx2>},
    {"scalar", always_available, unpack_run<unpack_scalar>}};

}  // namespace

KernelVariants<RoundArgs> round_kernels() { return kRound; }
KernelVariants<RoundPackArgs> round_pack_kernels() { return kRoundPack; }
KernelVariants<UnpackArgs> unpack_kernels() { return kUnpack; }

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

}  // namespace nexus::cpu
