// Single-token (decode) attention over a filled KV cache at the benchmark models' head shapes,
// per cache type, context length and thread count: the time of one attention() call for one
// layer, with the cache warm (in L2/L3) or cold (in memory, as in a model). Parity:
// tests/parity/attention_decode_parity_test.cc.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/quant.h"
#include "nexus/core/thread_pool.h"
#include "ops/attention.h"

namespace nexus {
namespace {

void BM_AttentionDecode(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t n_heads = state.range(1), n_kv = state.range(2), hd = state.range(3);
  const auto len = static_cast<int32_t>(state.range(4));
  const int threads = static_cast<int>(state.range(5));
  const bool cold = state.range(6) != 0;
  const int64_t width = n_kv * hd, qw = n_heads * hd;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // Cold: enough layers (one per call, in turn) that the cache does not stay in L3 (32 MiB), as in
  // a model, where the weights stream through between two reads of a layer's cache. 96 MiB of
  // layers by default; NEXUS_BENCH_COLD_MIB sets it, for hosts whose L3 holds 96 MiB (the Intel
  // host's 480 MiB: at 1024 MiB the 4096-key rows read 14-15 GB/s on two threads, as in the
  // model, against 23-26 at 96).
  const char* cold_mib = std::getenv("NEXUS_BENCH_COLD_MIB");
  const int64_t cold_bytes = (cold_mib != nullptr ? std::atoll(cold_mib) : 96) << 20;
  const int64_t layer_bytes = 2 * len * static_cast<int64_t>(row_bytes(type, width));
  const int64_t layers = cold ? std::max<int64_t>(2, cold_bytes / layer_bytes) : 1;
  KvCache kv(layers, 1, len, n_kv, hd, type);
  if (!kv.reserve(0, len).is_ok()) std::abort();
  std::vector<float> k(width), v(width), q(qw), out(qw);
  for (int64_t l = 0; l < layers; ++l) {
    for (int32_t j = 0; j < len; ++j) {
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      kv.store(l, 0, j, k.data(), v.data());
    }
  }
  for (float& x : q) x = nd(rng);
  const AttentionParams p{n_heads, n_kv, hd, 0, 0.125f};
  ThreadPool pool(threads);
  std::vector<float> scratch(attention_scratch_floats(p, width) * threads);
  const int32_t seq = 0, pos = len - 1;
  int64_t layer = 0;
  for (auto _ : state) {
    attention(q.data(), kv, layer, &seq, &pos, 1, p, out.data(), pool, scratch.data());
    if (++layer == layers) layer = 0;
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(layer_bytes) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(type)) + (cold ? " cold" : " warm"));
}

void decode_args(benchmark::internal::Benchmark* b) {
  // {n_heads, n_kv_heads, head_dim}: stories260K, L15M, L110M, Q06B.
  const int64_t shapes[][3] = {{8, 4, 8}, {6, 6, 48}, {12, 12, 64}, {16, 8, 128}};
  for (DType t : {DType::kF16, DType::kF32, DType::kQ8_0})
    for (const auto& s : shapes)
      for (int64_t len : {64, 512, 4096})
        for (int64_t threads : {1, 2})
          for (int64_t cold : {0, 1})
            b->Args({static_cast<int64_t>(t), s[0], s[1], s[2], len, threads, cold});
}

BENCHMARK(BM_AttentionDecode)->Apply(decode_args)->UseRealTime();

}  // namespace
}  // namespace nexus
