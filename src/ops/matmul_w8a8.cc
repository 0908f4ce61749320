// matmul_w8a8: quantizes the activations to int8 once per activation scale, then runs the int8
// GEMM over the sixteen-row groups of one or several W8A8 weights on the pool.
#include "ops/matmul_w8a8.h"

#include <algorithm>

#include "backends/cpu/gemm_w8a8.h"

namespace nexus {
namespace {

// Multiply-adds below which the whole call stays on the calling thread (as matmul's dot path).
constexpr int64_t kMinParallelWork = 64 * 1024;
constexpr int kMaxOuts = 4;

// Activation codes rows padded to 64 bytes, then the scales and the sums.
size_t codes_stride(int64_t k) { return (static_cast<size_t>(k) + 63) / 64 * 64; }

}  // namespace

size_t matmul_w8a8_scratch_bytes(int64_t k, int64_t n_tokens) {
  return codes_stride(k) * static_cast<size_t>(n_tokens) +
         static_cast<size_t>(n_tokens) * (sizeof(float) + sizeof(int32_t)) + 256;
}

void matmul_w8a8(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                 ThreadPool& pool, Arena& scratch) {
  const int64_t k = outs[0].w->dim(1);
  const size_t stride = codes_stride(k);
  const cpu::W8A8QuantizeFn quantize = cpu::quantize_act_w8a8();
  cpu::W8A8Problem probs[kMaxOuts];
  int64_t first_unit[kMaxOuts + 1] = {0};
  int64_t work = 0;
  for (int i = 0; i < count; ++i) {
    const Tensor& w = *outs[i].w;
    const auto* wp = static_cast<const uint8_t*>(w.row(0));
    const float act_scale = cpu::w8a8_act_scale(wp, k);
    // The codes of an earlier weight with the same activation scale (Q, K and V: one).
    int same = -1;
    for (int j = 0; j < i && same < 0; ++j)
      if (cpu::w8a8_act_scale(probs[j].w, k) == act_scale) same = j;
    probs[i] = {wp, w.dim(0), k, nullptr, stride, nullptr, nullptr, n_tokens, outs[i].y, w.dim(0)};
    if (same >= 0) {
      probs[i].xq = probs[same].xq, probs[i].xs = probs[same].xs, probs[i].xsum = probs[same].xsum;
    } else {
      auto* xq = static_cast<int8_t*>(scratch.alloc(stride * static_cast<size_t>(n_tokens)));
      auto* xs = scratch.alloc_n<float>(static_cast<size_t>(n_tokens));
      auto* xsum = scratch.alloc_n<int32_t>(static_cast<size_t>(n_tokens));
      auto convert = [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          quantize(x + t * k, k, act_scale, xq + t * stride, xs + t, xsum + t);
      };
      if (n_tokens > 1)
        pool.parallel_for(n_tokens, convert);
      else
        convert(0, n_tokens);
      probs[i].xq = xq, probs[i].xs = xs, probs[i].xsum = xsum;
    }
    first_unit[i + 1] = first_unit[i] + cpu::w8a8_units(w.dim(0));
    work += w.dim(0) * k * n_tokens;
  }
  const cpu::W8A8GemmFn gemm = cpu::gemm_w8a8();
  // Units (sixteen-row groups, and each weight's tail) numbered across the weights.
  auto run_units = [&](int64_t u0, int64_t u1) {
    for (int i = 0; i < count && u0 < u1; ++i) {
      if (u0 >= first_unit[i + 1]) continue;
      const int64_t e = std::min(u1, first_unit[i + 1]);
      gemm(probs[i], u0 - first_unit[i], e - first_unit[i]);
      u0 = e;
    }
  };
  const int64_t units = first_unit[count];
  if (units < 2 || pool.size() == 1 || work < kMinParallelWork) {
    run_units(0, units);
    return;
  }
  // Contiguous shares walked front to back (each reads its own weight stream); a thread that
  // finishes early takes half of the largest share left. Pieces of four groups: the kernel's
  // register block.
  pool.steal_for(units, 4, run_units);
}

}  // namespace nexus
