// DataParallel's bookkeeping on one process: ZeRO 1 shards that tile the parameters on 64-byte
// boundaries with tensor pieces an optimizer can be built from, the wire bytes of each stage, the
// flag parsers; and the local communicator's identities.
#include "nexus/dist/data_parallel.h"

#include <gtest/gtest.h>

#include <numeric>

namespace nexus::dist {
namespace {

// A communicator that claims to be rank `rank` of `size` (only the bookkeeping is exercised).
class FakeRanks final : public Communicator {
 public:
  FakeRanks(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "fake"; }
  void send_recv(std::span<const float>, int, std::span<float>, int) override {}
  std::string transport() const override { return "none"; }
  void all_reduce_sum(std::span<float>) override {}
  void all_reduce_sum(std::span<double>) override {}
  Ticket start_all_reduce_sum(std::span<float>, CommDType) override { return 0; }
  void wait(Ticket) override {}
  Ticket start_reduce_scatter_sum(std::span<const float>, std::span<float>,
                                  std::span<const size_t>) override {
    return 0;
  }
  void all_gather(std::span<float>, std::span<const size_t>) override {}
  void gather(std::span<const float>, std::span<float>, std::span<const size_t>, int) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }
  double comm_seconds() const override { return 0; }
  double blocked_seconds() const override { return 0; }

 private:
  int rank_, size_;
};

std::vector<train::ParamInfo> tensors() {
  // A norm vector, a matrix, another vector: 100 + 3 x 77 + 50 floats.
  std::vector<train::ParamInfo> t(3);
  t[0] = {"a.weight", {100}, 0, 100};
  t[1] = {"b.weight", {3, 77}, 100, 231};
  t[2] = {"c.weight", {50}, 331, 50};
  return t;
}

TEST(DataParallel, ZeroOneShardsTileTheParameters) {
  const auto t = tensors();
  for (int world : {1, 2, 3, 5}) {
    size_t covered = 0;
    for (int rank = 0; rank < world; ++rank) {
      FakeRanks comm(rank, world);
      DataParallel dp(comm, t, 381, {1, CommDType::kF32, 1 << 20});
      EXPECT_EQ(dp.shard_begin(), covered) << world << " " << rank;
      if (rank + 1 < world) {
        EXPECT_EQ(dp.shard_end() % 16, 0u);
      }
      covered = dp.shard_end();
      const auto counts = dp.shard_counts();
      EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), size_t{0}), 381u);
      EXPECT_EQ(counts[rank], dp.shard_end() - dp.shard_begin());
      // The pieces tile the shard, keep their tensor's rank, and make an optimizer.
      size_t at = 0;
      for (const train::ParamInfo& p : dp.shard_tensors()) {
        EXPECT_EQ(p.offset, at);
        at += static_cast<size_t>(p.numel);
        EXPECT_EQ(p.shape.size(), p.name == "b.weight" ? 2u : 1u);
      }
      EXPECT_EQ(at, dp.shard_end() - dp.shard_begin());
      train::OptimizerOptions o;
      auto opt = train::make_optimizer(dp.shard_tensors(), o);
      ASSERT_TRUE(opt) << opt.status().message();
      EXPECT_EQ(opt.value()->state_bytes(), 2 * 4 * at);
    }
    EXPECT_EQ(covered, 381u);
  }
}

TEST(DataParallel, WireBytesPerStage) {
  FakeRanks comm(0, 4);
  const auto t = tensors();
  // An all-reduce sends 2 (N - 1) / N of the buffer; bf16 halves it; ZeRO 1's reduce-scatter and
  // all-gather send (N - 1) / N each, and so do ZeRO 2's (its reduce-scatters cut by blocks).
  EXPECT_DOUBLE_EQ(DataParallel(comm, t, 381, {0, CommDType::kF32, 1}).bytes_per_step(),
                   1.5 * 381 * 4);
  EXPECT_DOUBLE_EQ(DataParallel(comm, t, 381, {0, CommDType::kBF16, 1}).bytes_per_step(),
                   1.5 * 381 * 2);
  EXPECT_DOUBLE_EQ(DataParallel(comm, t, 381, {1, CommDType::kF32, 1}).bytes_per_step(),
                   1.5 * 381 * 4);
  EXPECT_DOUBLE_EQ(DataParallel(comm, t, 381, {2, CommDType::kF32, 1}).bytes_per_step(),
                   1.5 * 381 * 4);
  EXPECT_THROW(DataParallel(comm, t, 381, {3, CommDType::kF32, 1}), Error);
}

TEST(DataParallel, FlagsParseOrNameTheirValues) {
  int z = -1;
  EXPECT_TRUE(parse_zero("1", &z));
  EXPECT_EQ(z, 1);
  const Status bad = parse_zero("3", &z);
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.message().find("--zero"), std::string::npos);
  CommDType d = CommDType::kF32;
  EXPECT_TRUE(parse_comm_dtype("bf16", &d));
  EXPECT_EQ(d, CommDType::kBF16);
  EXPECT_FALSE(parse_comm_dtype("fp8", &d));
}

TEST(DataParallel, LocalCommunicatorIsTheIdentity) {
  auto c = make_local_communicator();
  EXPECT_EQ(c->size(), 1);
  std::vector<float> v{1, 2, 3};
  c->all_reduce_sum(v);
  c->wait(c->start_all_reduce_sum(v, CommDType::kBF16));
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  std::vector<float> out(3);
  const size_t counts[] = {3};
  c->reduce_scatter_sum(v, out, counts);
  EXPECT_EQ(out, v);
  // One process under DataParallel: the mean is the value, the norm is the local one.
  DataParallel dp(*c, tensors(), 381, {});
  EXPECT_DOUBLE_EQ(dp.mean(2.5), 2.5);
}

}  // namespace
}  // namespace nexus::dist
