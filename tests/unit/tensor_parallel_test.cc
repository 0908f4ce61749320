// Tensor parallelism without MPI: a group of threads in one process stands for the ranks. The
// weight split reassembles every tensor exactly; N slices of a training model give the whole
// model's loss and gradients (each slice's part of them); N slices of a loaded model give its
// logits and hold 1/N of its KV cache; configs that do not split are refused by name.
#include "models/tensor_parallel.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "nexus/context.h"
#include "nexus/model.h"
#include "nexus/train/train_model.h"

namespace nexus {
namespace {

// The ranks as threads: all_reduce_sum adds the ranks' buffers in rank order, so every rank gets
// the same bits (as MPI's sum does).
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), barrier_(n), ptrs_(static_cast<size_t>(n)) {
    for (int r = 0; r < n; ++r) members_.push_back(std::make_unique<Member>(this, r));
  }
  TensorParallel* member(int r) { return members_[static_cast<size_t>(r)].get(); }
  // Runs fn(rank) on n threads and waits for them.
  void run(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r) threads.emplace_back(fn, r);
    for (std::thread& t : threads) t.join();
  }

 private:
  struct Member final : TensorParallel {
    Member(ThreadGroup* g, int r) : g(g), r(r) {}
    int rank() const override { return r; }
    int size() const override { return g->n_; }
    void all_reduce_sum(float* x, int64_t n) override { g->sum(r, x, n); }
    ThreadGroup* g;
    int r;
  };
  void sum(int r, float* x, int64_t n) {
    ptrs_[static_cast<size_t>(r)] = x;
    barrier_.arrive_and_wait();
    std::vector<float> acc(static_cast<size_t>(n), 0.0f);
    for (const float* p : ptrs_)
      for (int64_t i = 0; i < n; ++i) acc[static_cast<size_t>(i)] += p[i];
    barrier_.arrive_and_wait();  // every rank has read every buffer
    std::copy(acc.begin(), acc.end(), x);
  }
  int n_;
  std::barrier<> barrier_;
  std::vector<float*> ptrs_;
  std::vector<std::unique_ptr<Member>> members_;
};

ModelConfig config(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.arch_name = arch == Arch::kGpt2 ? "gpt2" : arch == Arch::kQwen3 ? "qwen3" : "llama";
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = arch == Arch::kGpt2 ? 4 : 2;
  c.head_dim = 8;
  c.rope_dim = 8;
  c.ffn_dim = 48;
  c.n_vocab = 40;
  c.n_ctx_train = 16;
  c.norm_eps = 1e-5f;
  c.rope = arch == Arch::kQwen3  ? RopeStyle::kNeox
           : arch == Arch::kGpt2 ? RopeStyle::kNone
                                 : RopeStyle::kNormal;
  return c;
}

std::unique_ptr<train::TrainModel> full_model(const ModelConfig& c, int64_t b, int64_t t,
                                              const train::TrainOptions& o = {}) {
  auto m = train::TrainModel::create(c, b, t, {0.3f, 7, true}, o);
  EXPECT_TRUE(m) << m.status().message();
  return std::move(m).value();
}

// This rank's slice of every parameter (or gradient) of a whole model's flat array.
std::vector<float> cut(const train::TrainModel& full, std::span<const float> data,
                       const train::TrainModel& slice, int rank, int size) {
  std::vector<float> out(slice.params().size());
  for (size_t i = 0; i < full.tensors().size(); ++i) {
    const train::ParamInfo& f = full.tensors()[i];
    const TpSplit split = tp_split(full.config(), f.name, rank, size);
    EXPECT_EQ(slice.tensors()[i].shape, tp_slice_shape(f.shape, split)) << f.name;
    EXPECT_TRUE(tp_slice(data.data() + f.offset, DType::kF32, f.shape, split,
                         out.data() + slice.tensors()[i].offset, f.name));
  }
  return out;
}

class TensorParallelArch : public ::testing::TestWithParam<Arch> {};

TEST_P(TensorParallelArch, SlicesReassembleEveryTensorExactly) {
  const ModelConfig c = config(GetParam());
  auto full = full_model(c, 1, 4);
  int split_tensors = 0;
  for (const train::ParamInfo& t : full->tensors()) {
    std::vector<float> back(static_cast<size_t>(t.numel), -1.0f);
    const float* src = full->params().data() + t.offset;
    for (int r = 0; r < 2; ++r) {
      const TpSplit s = tp_split(c, t.name, r, 2);
      int64_t n = 1;
      for (int64_t d : tp_slice_shape(t.shape, s)) n *= d;
      std::vector<float> part(static_cast<size_t>(n));
      ASSERT_TRUE(tp_slice(src, DType::kF32, t.shape, s, part.data(), t.name));
      tp_unslice(part.data(), DType::kF32, t.shape, s, back.data());
      if (s.kind != TpSplit::kWhole) {
        EXPECT_EQ(n * 2, t.numel) << t.name;
        split_tensors += r == 0;
      }
    }
    EXPECT_EQ(0, std::memcmp(back.data(), src, back.size() * sizeof(float))) << t.name;
  }
  // q, k, v, output, ffn gate, up and down in both blocks; gpt2: the fused qkv and its bias, the
  // output, ffn up and its bias, down.
  EXPECT_EQ(split_tensors, GetParam() == Arch::kGpt2 ? 2 * 6 : 2 * 7);
}

// Runs one forward and backward of the whole model and of `size` slices over a thread group, and
// compares the loss (every rank) and each rank's gradients with its slice of the whole's.
void expect_slices_match(const ModelConfig& c, int size, const train::TrainOptions& opts) {
  const int64_t b = 2, t = 8;
  auto full = full_model(c, b, t, opts);
  std::vector<int32_t> tokens(b * t), targets(b * t);
  for (int64_t i = 0; i < b * t; ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % c.n_vocab);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % c.n_vocab);
  }
  full->zero_grad();
  const float loss = full->forward(tokens, targets, b, t);
  full->backward();
  ThreadGroup group(size);
  std::vector<float> losses(size);
  std::vector<double> worst(size, 0.0), scale(size, 0.0);
  group.run([&](int r) {
    train::TrainOptions o = opts;
    o.tp = group.member(r);
    train::InitOptions none;
    none.random = false;
    auto slice = train::TrainModel::create(tensor_parallel_config(c, size), b, t, none, o);
    ASSERT_TRUE(slice) << slice.status().message();
    train::TrainModel& m = *slice.value();
    const std::vector<float> p = cut(*full, full->params(), m, r, size);
    std::copy(p.begin(), p.end(), m.params().begin());
    m.zero_grad();
    losses[r] = m.forward(tokens, targets, b, t);
    m.backward();
    // The exchange's part (dist::TensorParallelTraining::finish): the shared norms' gradients.
    for (const train::ParamInfo& info : m.tensors())
      if (tp_partial_grad(c, info.name))
        group.member(r)->all_reduce_sum(m.grads().data() + info.offset, info.numel);
    const std::vector<float> want = cut(*full, full->grads(), m, r, size);
    for (size_t i = 0; i < want.size(); ++i) {
      worst[r] = std::max(worst[r], std::fabs(double(want[i]) - m.grads()[i]));
      scale[r] = std::max(scale[r], std::fabs(double(want[i])));
    }
  });
  for (int r = 0; r < size; ++r) {
    EXPECT_NEAR(losses[r], loss, 1e-5 * std::max(1.0f, loss)) << "rank " << r;
    EXPECT_GT(scale[r], 1e-3) << "rank " << r;
    EXPECT_LT(worst[r], 2e-5 * scale[r]) << "rank " << r << " of " << size;
  }
}

TEST_P(TensorParallelArch, TwoSlicesGiveTheWholeModelsLossAndGradients) {
  expect_slices_match(config(GetParam()), 2, {});
}

TEST_P(TensorParallelArch, TheSumsHoldUnderCheckpointingAndSelectiveRecompute) {
  train::TrainOptions o;
  o.recompute_blocks = true;
  expect_slices_match(config(GetParam()), 2, o);
  o.recompute_blocks = false;
  o.selective_recompute = true;
  expect_slices_match(config(GetParam()), 2, o);
}

INSTANTIATE_TEST_SUITE_P(Archs, TensorParallelArch,
                         ::testing::Values(Arch::kLlama, Arch::kQwen3, Arch::kGpt2),
                         [](const auto& info) {
                           return std::string(info.param == Arch::kGpt2    ? "gpt2"
                                              : info.param == Arch::kQwen3 ? "qwen3"
                                                                           : "llama");
                         });

TEST(TensorParallel, FourSlicesOfAModelWithOneKeyValueHeadPerRank) {
  ModelConfig c = config(Arch::kLlama);
  c.n_kv_heads = 4;
  expect_slices_match(c, 4, {});
}

TEST(TensorParallel, ConfigsThatDoNotSplitAreRefusedByName) {
  ModelConfig c = config(Arch::kLlama);
  EXPECT_TRUE(check_tensor_parallel(c, 2));
  const Status kv = check_tensor_parallel(c, 4);  // 2 key/value heads
  EXPECT_NE(kv.message().find("key/value heads (2) is not a multiple of 4"), std::string::npos)
      << kv.message();
  c.ffn_dim = 49;
  const Status ffn = check_tensor_parallel(c, 2);
  EXPECT_NE(ffn.message().find("feed-forward width (49)"), std::string::npos) << ffn.message();
  ModelConfig m = config(Arch::kLlama);
  m.arch = Arch::kMamba;
  m.arch_name = "mamba";
  m.ssm_inner = 64;
  m.ssm_state = 4;
  EXPECT_NE(check_tensor_parallel(m, 2).message().find("state-space"), std::string::npos);
}

TEST(TensorParallel, QuantizedColumnsSplitOnBlockBoundariesOnly) {
  // Q8_0 rows of 64 values: two blocks of 34 bytes; rank r's 32 columns are block r.
  const std::vector<int64_t> shape = {3, 64};
  std::vector<uint8_t> full(3 * 68);
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<uint8_t>(i * 13 + 1);
  TpSplit s;
  s.kind = TpSplit::kCols;
  std::vector<uint8_t> back(full.size(), 0);
  for (int r = 0; r < 2; ++r) {
    s.ranges = {{32 * r, 32}};
    std::vector<uint8_t> part(3 * 34);
    ASSERT_TRUE(tp_slice(full.data(), DType::kQ8_0, shape, s, part.data(), "w"));
    EXPECT_EQ(0, std::memcmp(part.data() + 34, full.data() + 68 + 34 * r, 34));  // row 1
    tp_unslice(part.data(), DType::kQ8_0, shape, s, back.data());
  }
  EXPECT_EQ(back, full);
  s.ranges = {{24, 24}};
  const Status bad = tp_slice(full.data(), DType::kQ8_0, shape, s, back.data(), "blk.0.ffn_down");
  EXPECT_NE(bad.message().find("blk.0.ffn_down (Q8_0, blocks of 32 values) cannot be split"),
            std::string::npos)
      << bad.message();
}

// Logits of a prompt and then of one decoded token, from a context on `model`.
std::vector<float> logits_of(const Model& model, size_t* kv_bytes) {
  ContextOptions o;
  o.n_ctx = 16;
  o.kv_type = DType::kF32;
  auto ctx = Context::create(model, o);
  EXPECT_TRUE(ctx) << ctx.status().message();
  Batch batch;
  for (int i = 0; i < 6; ++i) batch.add((i * 11 + 2) % 40, i, 0, true);
  std::vector<float> out, step;
  EXPECT_TRUE(ctx.value()->decode(batch, &out));
  batch.clear();
  batch.add(5, 6, 0, true);
  EXPECT_TRUE(ctx.value()->decode(batch, &step));
  out.insert(out.end(), step.begin(), step.end());
  *kv_bytes = ctx.value()->kv_bytes();
  return out;
}

TEST_P(TensorParallelArch, SlicesOfALoadedModelGiveItsLogitsWithPartOfTheCache) {
  const std::string path = ::testing::TempDir() + "/tp_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(full_model(config(GetParam()), 1, 4)->export_gguf(path));
  auto whole = Model::load(path);
  ASSERT_TRUE(whole) << whole.status().message();
  size_t whole_kv = 0;
  const std::vector<float> want = logits_of(*whole.value(), &whole_kv);
  ThreadGroup group(2);
  std::vector<std::vector<float>> got(2);
  std::vector<size_t> kv(2);
  group.run([&](int r) {
    auto slice = Model::load(path, group.member(r));
    ASSERT_TRUE(slice) << slice.status().message();
    EXPECT_EQ(slice.value()->config().n_heads, config(GetParam()).n_heads / 2);
    got[r] = logits_of(*slice.value(), &kv[r]);
  });
  std::filesystem::remove(path);
  double scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(double(v)));
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[r][i], want[i], 1e-5 * std::max(1.0, scale)) << "rank " << r << " at " << i;
    EXPECT_EQ(kv[r] * 2, whole_kv);
  }
}

}  // namespace
}  // namespace nexus
