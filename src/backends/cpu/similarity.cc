// Vector search kernels: rows split into fixed chunks over the pool; each chunk scores blocks of
// rows against every query (the scores of a block stay in cache) and keeps per query a heap of
// its k best; the chunks' heaps are merged in chunk order.
#include "backends/cpu/similarity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/isa.h"
#include "nexus/core/thread_pool.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

struct Hit {
  float score;
  int64_t id;
};
// a before b in the answer: the higher score, then the smaller id.
bool better(const Hit& a, const Hit& b) {
  return a.score > b.score || (a.score == b.score && a.id < b.id);
}

// Keeps the k best hits offered, as a heap whose front is the worst kept.
void offer(std::vector<Hit>& heap, int64_t k, Hit h) {
  if (static_cast<int64_t>(heap.size()) < k) {
    heap.push_back(h);
    std::push_heap(heap.begin(), heap.end(), better);
  } else if (better(h, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), better);
    heap.back() = h;
    std::push_heap(heap.begin(), heap.end(), better);
  }
}

float row_value(const TopKArgs& a, int64_t r, int64_t c) {
  switch (a.type) {
    case DType::kF32:
      return static_cast<const float*>(a.rows)[r * a.dim + c];
    case DType::kF16:
      return f16_to_f32(static_cast<const uint16_t*>(a.rows)[r * a.dim + c]);
    default:  // kI8 (the front-end allows no other type)
      return static_cast<float>(static_cast<const int8_t*>(a.rows)[r * a.dim + c]);
  }
}

void dots_scalar(const TopKArgs& a, int64_t q0, int64_t q1, int64_t r0, int64_t r1, float* out) {
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t r = r0; r < r1; ++r) {
      float s = 0.0f;
      for (int64_t c = 0; c < a.dim; ++c) s += a.queries[q * a.dim + c] * row_value(a, r, c);
      if (a.type == DType::kI8) s *= a.scales[r];
      out[(q - q0) * (r1 - r0) + (r - r0)] = s;
    }
}

// Many queries: a block's scores as one product Q R^T on our f32 GEMM (f16 and int8 rows widened
// into a per-thread block first), compute-bound where the dot kernel is bound by its loads.
void dots_gemm(const TopKArgs& a, int64_t q0, int64_t q1, int64_t r0, int64_t r1, float* out) {
  const int64_t nr = r1 - r0, d = a.dim;
  const float* rows = static_cast<const float*>(a.rows) + r0 * d;
  if (a.type != DType::kF32) {
    thread_local std::vector<float> wide;
    wide.resize(static_cast<size_t>(nr * d));
    // A loop per type: no switch per value on this path.
    if (a.type == DType::kF16) {
      const uint16_t* h = static_cast<const uint16_t*>(a.rows) + r0 * d;
      for (int64_t i = 0; i < nr * d; ++i) wide[i] = f16_to_f32(h[i]);
    } else {
      const int8_t* q = static_cast<const int8_t*>(a.rows) + r0 * d;
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t c = 0; c < d; ++c) wide[r * d + c] = q[r * d + c] * a.scales[r0 + r];
    }
    rows = wide.data();
  }
  gemm_f32(false, true, q1 - q0, nr, d, a.queries + q0 * d, d, rows, d, false, out, nr);
}

bool many_queries(const TopKArgs& a) { return a.nq >= 8; }

using Dots = void (*)(const TopKArgs&, int64_t, int64_t, int64_t, int64_t, float*);

template <Dots dots>
void topk_run(const TopKArgs& a, ThreadPool* pool) {
  constexpr int64_t kBlock = 128;  // rows scored at a time against every query
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(64, (a.n + 4095) / 4096));
  const int64_t per = (a.n + chunks - 1) / chunks;
  std::vector<std::vector<Hit>> heaps(static_cast<size_t>(chunks * a.nq));
  auto chunk = [&](int64_t c) {
    thread_local std::vector<float> tile;
    tile.resize(static_cast<size_t>(kBlock * a.nq));
    for (int64_t q = 0; q < a.nq; ++q) heaps[c * a.nq + q].reserve(static_cast<size_t>(a.k));
    const int64_t end = std::min(a.n, (c + 1) * per);
    for (int64_t r0 = c * per; r0 < end; r0 += kBlock) {
      const int64_t r1 = std::min(end, r0 + kBlock), nr = r1 - r0;
      dots(a, 0, a.nq, r0, r1, tile.data());
      for (int64_t q = 0; q < a.nq; ++q) {
        std::vector<Hit>& h = heaps[c * a.nq + q];
        for (int64_t r = 0; r < nr; ++r) offer(h, a.k, {tile[q * nr + r], r0 + r});
      }
    }
  };
  if (pool != nullptr && chunks > 1)
    pool->parallel_for(
        chunks,
        [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) chunk(c);
        },
        1);
  else
    for (int64_t c = 0; c < chunks; ++c) chunk(c);
  for (int64_t q = 0; q < a.nq; ++q) {
    std::vector<Hit> all;
    for (int64_t c = 0; c < chunks; ++c)
      all.insert(all.end(), heaps[c * a.nq + q].begin(), heaps[c * a.nq + q].end());
    const auto keep = std::min<size_t>(all.size(), static_cast<size_t>(a.k));
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                      better);
    for (int64_t j = 0; j < a.k; ++j) {
      const bool have = j < static_cast<int64_t>(keep);
      a.scores[q * a.k + j] = have ? all[j].score : -std::numeric_limits<float>::infinity();
      a.ids[q * a.k + j] = have ? all[j].id : -1;
    }
  }
}

const KernelVariant<TopKArgs> kTopK[] = {
    {"gemm", gemm_f32_active, topk_run<dots_gemm>, many_queries},
    {"avx2", avx2_active, topk_run<topk_dots_avx2>},
    {"scalar", always_available, topk_run<dots_scalar>}};

}  // namespace

KernelVariants<TopKArgs> topk_kernels() { return kTopK; }

}  // namespace nexus::cpu
