// matmul_group (Q/K/V and gate/up in one parallel region) gives exactly what matmul gives weight
// by weight: same-type and mixed-type groups (Q4_0x8 included), row counts that cut the eight-row
// units and split chunks across weights, decode and prefill token counts, 1-3 threads.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "backends/cpu/repack.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "ops/matmul.h"
#include "quant_test_util.h"
#include "test_idle_prefetch.h"

namespace nexus {
namespace {

struct Weight {
  std::vector<uint8_t> bytes;
  Tensor t;
};

Weight make_weight(DType t, int64_t rows, int64_t k, uint32_t seed) {
  Weight w;
  const DType file = t == DType::kQ4_0x8 ? DType::kQ4_0 : t;
  w.bytes = test::quantize(file, test::random_floats(rows * k, seed));
  if (t == DType::kQ4_0x8) {
    std::vector<uint8_t> packed(w.bytes.size());
    cpu::repack_q4_0x8(w.bytes.data(), packed.data(), rows, k);
    w.bytes = std::move(packed);
  }
  w.t = Tensor(t, {rows, k}, w.bytes.data());
  return w;
}

// Runs the group and the weights one by one on the same input and compares bit for bit.
void expect_group_matches(const std::vector<DType>& types, const std::vector<int64_t>& rows,
                          int64_t k) {
  std::vector<Weight> ws;
  for (size_t i = 0; i < types.size(); ++i)
    ws.push_back(make_weight(types[i], rows[i], k, 50 + static_cast<uint32_t>(i)));
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 5, 17}) {
      const auto x = test::random_floats(n * k, 70 + static_cast<uint32_t>(n), 0.5f);
      std::vector<std::vector<float>> want(ws.size()), got(ws.size());
      std::vector<MatmulOut> outs;
      for (size_t i = 0; i < ws.size(); ++i) {
        want[i].assign(n * rows[i], -1.0f);
        got[i].assign(n * rows[i], -2.0f);
        Arena s(matmul_scratch_bytes(ws[i].t, n) + 64, MemCategory::kScratch);
        matmul(ws[i].t, x.data(), n, want[i].data(), pool, s);
        outs.push_back({&ws[i].t, got[i].data()});
      }
      const int count = static_cast<int>(outs.size());
      Arena s(matmul_group_scratch_bytes(outs.data(), count, n) + 64, MemCategory::kScratch);
      matmul_group(outs.data(), count, x.data(), n, pool, s);
      for (size_t i = 0; i < ws.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "weight " << i << " (" << dtype_name(types[i])
                                   << ", rows " << rows[i] << ") tokens=" << n
                                   << " threads=" << threads;
    }
  }
}

TEST(MatmulGroup, SameTypeGroupsMatchMatmul) {
  for (DType t : test::computable_dtypes()) {
    const int64_t k = traits(t).block_size == 256 ? 512 : 96;
    expect_group_matches({t, t, t}, {40, 13, 13}, k);  // Q/K/V with GQA-sized K and V
    expect_group_matches({t, t}, {37, 37}, k);         // gate/up
  }
  expect_group_matches({DType::kQ4_0x8, DType::kQ4_0x8, DType::kQ4_0x8}, {64, 21, 21}, 96);
}

// F32, F16 and BF16 groups at 17 tokens run as one group on our GEMM where prefill uses it (the
// tokens packed once a pass for all the weights): more than one pass of k and one block of rows.
TEST(MatmulGroup, FloatGroupsOnOurGemmMatchMatmul) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    expect_group_matches({t, t, t}, {300, 77, 77}, 800);
    expect_group_matches({t, t}, {170, 170}, 400);
  }
}

TEST(MatmulGroup, MixedTypeGroupsMatchMatmul) {
  // Q4_K_M files mix Q4_K and Q6_K in one layer; Q4_0 files keep a few Q8_0 or F16 tensors.
  expect_group_matches({DType::kQ4_K, DType::kQ4_K, DType::kQ6_K}, {24, 8, 8}, 512);
  expect_group_matches({DType::kQ4_0x8, DType::kQ8_0, DType::kF16}, {35, 16, 9}, 96);
  expect_group_matches({DType::kF32, DType::kQ4_0x8}, {3, 70}, 64);
}

TEST(MatmulGroup, RejectsBadGroups) {
  ThreadPool pool(1);
  Arena s(1 << 16, MemCategory::kScratch);
  std::vector<float> buf(4096), x(256), y(256);
  const Tensor a(DType::kF32, {4, 64}, buf.data());
  const Tensor b(DType::kF32, {4, 32}, buf.data());
  MatmulOut two[] = {{&a, y.data()}, {&b, y.data()}};
  EXPECT_THROW(matmul_group(two, 2, x.data(), 1, pool, s), Error);  // k differs
  EXPECT_THROW(matmul_group(two, 0, x.data(), 1, pool, s), Error);
  MatmulOut five[] = {two[0], two[0], two[0], two[0], two[0]};
  EXPECT_THROW(matmul_group(five, 5, x.data(), 1, pool, s), Error);
}

// Where each thread's share starts: ThreadPool::steal_for gives thread i of n the units from
// units * i / n, units being groups of eight rows numbered across the weights.
TEST(MatmulGroup, ShareStartsFollowTheUnitSplit) {
  const Weight a = make_weight(DType::kQ8_0, 64, 64, 1);  // 8 units
  const Weight b = make_weight(DType::kQ8_0, 30, 64, 2);  // 4 units (the last one cut)
  const Tensor* w[] = {&a.t, &b.t};
  const size_t stride = a.t.row_stride();
  auto at = [&](int nt, int t) { return matmul_group_share_start(w, 2, nt, t); };
  EXPECT_EQ(at(2, 0).weight, 0);
  EXPECT_EQ(at(2, 0).offset, 0u);
  EXPECT_EQ(at(2, 1).weight, 0);  // unit 6: row 48 of a
  EXPECT_EQ(at(2, 1).offset, 48 * stride);
  EXPECT_EQ(at(3, 2).weight, 1);  // unit 8: row 0 of b
  EXPECT_EQ(at(3, 2).offset, 0u);
  EXPECT_EQ(at(4, 3).weight, 1);  // unit 9: row 8 of b
  EXPECT_EQ(at(4, 3).offset, 8 * stride);
  const Tensor* one[] = {&b.t};  // 4 units over 8 threads: thread 1 starts on unit 0
  EXPECT_EQ(matmul_group_share_start(one, 1, 8, 1).weight, 0);
  EXPECT_EQ(matmul_group_share_start(one, 1, 8, 1).offset, 0u);
}

// matmul_group_prefetch hands the worker its share's first bytes (what the idle worker then
// prefetches), only when the group would be split over the threads at that token count.
TEST(MatmulGroup, PrefetchGivesWorkersTheirShareOnlyWhenSplit) {
  using namespace std::chrono_literals;
  const Weight big = make_weight(DType::kQ4_0x8, 512, 1024, 3);  // split at one token
  const Weight tiny = make_weight(DType::kQ8_0, 16, 64, 4);      // too little work: caller only
  const Tensor* bw[] = {&big.t};
  const Weight wide = make_weight(DType::kQ8_0, 512, 1024, 5);  // sgemm from 16 tokens
  const Tensor* tw[] = {&tiny.t};
  const Tensor* ww[] = {&wide.t};
  ThreadPool pool(2);
  auto moved = [&](const Tensor* const* w, size_t bytes, uint64_t want) {
    return test::idle_prefetch_moved(
        pool, [&] { matmul_group_prefetch(w, 1, 1, pool, bytes); }, want);
  };
  EXPECT_EQ(moved(bw, 4096, 4096), 4096u);
  // The rest of the weight at most: its second half, 256 of its 512 rows.
  const size_t step = ThreadPool::kIdlePrefetchStep;
  const size_t half = (big.t.row_stride() * 256 + step - 1) / step * step;
  EXPECT_EQ(moved(bw, size_t{1} << 30, half), half);
  // Too small to split, or prefill-sized on a type that goes to sgemm: no range.
  const uint64_t start = pool.idle_prefetched_bytes();
  for (int r = 0; r < 5; ++r) {
    pool.run_chunks(2, [](int64_t) {});
    matmul_group_prefetch(tw, 1, 1, pool, 4096);
    matmul_group_prefetch(ww, 1, 16, pool, 4096);
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(pool.idle_prefetched_bytes(), start);
}

}  // namespace
}  // namespace nexus
