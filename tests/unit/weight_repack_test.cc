// Load-time repacking (models/weight_repack.h): which tensors a Q4_0 model gets repacked, that
// the logits do not change (decode, batched and prefill), and that the mapped source pages are
// handed back without losing the file's bytes.
#include "models/weight_repack.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/repack.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "models/random_model.h"
#include "nexus/context.h"
#include "nexus/model.h"

namespace nexus {
namespace {

// A tiny all-Q4_0 llama (tied, so the token table is Q4_0 and doubles as the head; vocab 300 =
// 37 groups of 8 and a tail of 4).
std::string q4_model_path() {
  static const std::string path = [] {
    GenModelOptions o;
    o.shape = parse_model_shape("custom:dim=64,layers=2,heads=4,ffn=96,vocab=300").value();
    o.type = ModelFileType::kQ4_0;
    o.pure = true;
    const std::string p =
        ::testing::TempDir() + "nexus_repack_q4_0_" + std::to_string(getpid()) + ".gguf";
    EXPECT_TRUE(write_random_model(o, p).is_ok());
    return p;
  }();
  return path;
}

std::unique_ptr<Model> load(bool repack) {
  if (!repack) setenv("NEXUS_REPACK", "0", 1);
  auto m = Model::load(q4_model_path());
  unsetenv("NEXUS_REPACK");
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::move(m).value() : nullptr;
}

// Logits for a prompt of n tokens (all rows), then one more decoded token.
std::vector<float> run(const Model& m, int n, int threads) {
  ContextOptions o;
  o.n_ctx = 64;
  o.n_threads = threads;
  auto ctx = Context::create(m, o);
  EXPECT_TRUE(ctx) << ctx.status().message();
  Batch b;
  for (int i = 0; i < n; ++i) b.add((i * 37 + 11) % 300, i, 0, true);
  std::vector<float> logits, all;
  EXPECT_TRUE(ctx.value()->decode(b, &logits).is_ok());
  all = logits;
  b.clear();
  b.add(7, n, 0, true);
  EXPECT_TRUE(ctx.value()->decode(b, &logits).is_ok());
  all.insert(all.end(), logits.begin(), logits.end());
  return all;
}

TEST(WeightRepack, Q4_0MatricesAndTheTiedTableAreRepacked) {
  auto plain = load(false);
  auto packed = load(true);
  ASSERT_TRUE(plain && packed);
  const ModelWeights& a = plain->weights();
  const ModelWeights& b = packed->weights();
  EXPECT_EQ(a.layers[0].wq.dtype(), DType::kQ4_0);
  EXPECT_EQ(a.tok_embd.dtype(), DType::kQ4_0);
  for (const LayerWeights& l : b.layers)
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      EXPECT_EQ(t->dtype(), DType::kQ4_0x8);
  EXPECT_EQ(b.tok_embd.dtype(), DType::kQ4_0x8);
  EXPECT_EQ(b.output.data(), b.tok_embd.data());  // tied: one copy
  EXPECT_EQ(b.out_norm.dtype(), DType::kF32);
  EXPECT_EQ(b.tok_embd.shape(), a.tok_embd.shape());
}

// Bit-identical logits: the repacked kernels repeat vec_dot's operations (1 and 2 threads;
// 3 tokens go through the token-batched kernels, 20 through the BLAS prefill path).
TEST(WeightRepack, LogitsAreUnchanged) {
  auto plain = load(false);
  auto packed = load(true);
  ASSERT_TRUE(plain && packed);
  for (int threads : {1, 2})
    for (int n : {1, 3, 20})
      EXPECT_EQ(run(*plain, n, threads), run(*packed, n, threads))
          << n << " tokens, " << threads << " threads";
}

// A Q4_K_M llama whose matrices fit the 256-element super-blocks: every Q4_K (Q6_K) matrix
// becomes Q4_Kx8 (Q6_Kx8), and the logits stay within f32 rounding of the plain layout's (the
// repacked kernels sum each super-block exactly and round once per super-block, vec_dot per
// lane); the 20-token prefill reads the same dequantized rows, so it is exact.
TEST(WeightRepack, KQuantMatricesAreRepackedAndLogitsStayClose) {
  GenModelOptions o;
  o.shape = parse_model_shape("custom:dim=256,layers=2,heads=4,ffn=512,vocab=300").value();
  o.type = ModelFileType::kQ4_K_M;
  const std::string p =
      ::testing::TempDir() + "nexus_repack_q4_k_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(write_random_model(o, p).is_ok());
  setenv("NEXUS_REPACK", "0", 1);
  auto plain = Model::load(p);
  unsetenv("NEXUS_REPACK");
  auto packed = Model::load(p);
  ASSERT_TRUE(plain && packed);
  int q4k = 0, q6k = 0;
  const ModelWeights& a = plain.value()->weights();
  const ModelWeights& b = packed.value()->weights();
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights& la = a.layers[i];
    const LayerWeights& lb = b.layers[i];
    const Tensor* ta[] = {&la.wq, &la.wk, &la.wv, &la.wo, &la.w_gate, &la.w_up, &la.w_down};
    const Tensor* tb[] = {&lb.wq, &lb.wk, &lb.wv, &lb.wo, &lb.w_gate, &lb.w_up, &lb.w_down};
    for (int j = 0; j < 7; ++j) {
      if (ta[j]->dtype() == DType::kQ4_K) {
        EXPECT_EQ(tb[j]->dtype(), DType::kQ4_Kx8) << "layer " << i << " tensor " << j;
        ++q4k;
      } else if (ta[j]->dtype() == DType::kQ6_K) {
        EXPECT_EQ(tb[j]->dtype(), DType::kQ6_Kx8) << "layer " << i << " tensor " << j;
        ++q6k;
      } else {
        EXPECT_EQ(tb[j]->dtype(), ta[j]->dtype()) << "layer " << i << " tensor " << j;
      }
    }
  }
  EXPECT_GE(q4k, 8);
  EXPECT_GE(q6k, 2);
  EXPECT_EQ(b.output.dtype(), DType::kQ6_Kx8);  // the tied Q6_K table, repacked once
  EXPECT_EQ(b.output.data(), b.tok_embd.data());
  for (int n : {1, 3}) {
    const auto x = run(*plain.value(), n, 2), y = run(*packed.value(), n, 2);
    ASSERT_EQ(x.size(), y.size());
    float scale = 0.0f;
    for (float v : x) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-4f * scale) << n << " tokens";
  }
  const auto x = run(*plain.value(), 20, 2), y = run(*packed.value(), 20, 2);
  EXPECT_TRUE(std::equal(x.begin(), x.end() - 300, y.begin())) << "prefill logits differ";
  std::remove(p.c_str());
}

// A head of another type (here Q8_0: the tiny rows do not fit Q6_K) is repacked to its own
// layout (Q8_0x8): the Q4_0 layers stay bit-identical, the head within f32 rounding (its kernel
// rounds once per block for eight rows, vec_dot_q8_0 per lane).
TEST(WeightRepack, OtherHeadTypesAreRepackedToo) {
  GenModelOptions o;
  o.shape = parse_model_shape("custom:dim=64,layers=1,heads=4,ffn=96,vocab=300,tied=0").value();
  o.type = ModelFileType::kQ4_0;
  const std::string p =
      ::testing::TempDir() + "nexus_repack_head_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(write_random_model(o, p).is_ok());
  setenv("NEXUS_REPACK", "0", 1);
  auto plain = Model::load(p);
  unsetenv("NEXUS_REPACK");
  auto packed = Model::load(p);
  ASSERT_TRUE(plain && packed);
  const Tensor& a = plain.value()->weights().output;
  const Tensor& b = packed.value()->weights().output;
  ASSERT_EQ(a.dtype(), DType::kQ8_0);
  EXPECT_EQ(b.dtype(), DType::kQ8_0x8);
  EXPECT_EQ(packed.value()->weights().layers[0].wq.dtype(), DType::kQ4_0x8);
  const auto x = run(*plain.value(), 3, 2), y = run(*packed.value(), 3, 2);
  ASSERT_EQ(x.size(), y.size());
  float scale = 0.0f;
  for (float v : x) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-5f * scale) << "logit " << i;
  std::remove(p.c_str());
}

// A model without repackable matrices (F16), loaded from its file: every matrix is copied
// unchanged into the huge-page allocation (same bytes, same logits), the untied token table stays
// a view of the file, and NEXUS_REPACK=0 leaves everything mapped.
TEST(WeightRepack, FileMatricesAreCopiedAndTheTokenTableStaysMapped) {
  GenModelOptions o;
  o.shape = parse_model_shape("custom:dim=64,layers=1,heads=4,ffn=96,vocab=300,tied=0").value();
  o.type = ModelFileType::kF16;
  const std::string p =
      ::testing::TempDir() + "nexus_repack_f16_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(write_random_model(o, p).is_ok());
  auto m = Model::load(p);
  ASSERT_TRUE(m) << m.status().message();
  setenv("NEXUS_REPACK", "0", 1);
  auto plain = Model::load(p);
  unsetenv("NEXUS_REPACK");
  ASSERT_TRUE(plain) << plain.status().message();
  const GgufFile& g = m.value()->gguf();
  const ModelWeights& w = m.value()->weights();
  EXPECT_EQ(w.tok_embd.data(), g.find_tensor("token_embd.weight")->data);
  for (const auto& [t, name] : {std::pair{&w.output, "output.weight"},
                                {&w.layers[0].wq, "blk.0.attn_q.weight"},
                                {&w.layers[0].w_down, "blk.0.ffn_down.weight"}}) {
    const GgufTensorInfo* ti = g.find_tensor(name);
    EXPECT_NE(t->data(), ti->data) << name;
    EXPECT_EQ(t->dtype(), DType::kF16) << name;
    auto bytes = read_file(p);
    ASSERT_TRUE(bytes);
    EXPECT_EQ(std::memcmp(t->data(), bytes->data() + g.data_offset() + ti->offset, ti->nbytes), 0)
        << name;
  }
  const GgufFile& gp = plain.value()->gguf();
  EXPECT_EQ(plain.value()->weights().output.data(), gp.find_tensor("output.weight")->data);
  EXPECT_EQ(run(*plain.value(), 3, 2), run(*m.value(), 3, 2));
  std::remove(p.c_str());
}

// Released source pages of a file mapping read back as the file's bytes.
TEST(WeightRepack, ReleasedPagesStillReadTheFile) {
  auto f = GgufFile::open(q4_model_path());
  ASSERT_TRUE(f) << f.status().message();
  const GgufTensorInfo* ti = f->find_tensor("token_embd.weight");
  ASSERT_NE(ti, nullptr);
  ModelWeights w;
  w.tok_embd = f->tensor(*ti);
  w.output = w.tok_embd;
  const GgufTensorInfo& first = f->tensors().front();
  const MappedSource source{q4_model_path(), first.data - f->data_offset() - first.offset};
  const RepackStats st = repack_weights(w, &source);
  EXPECT_EQ(st.tensors, 1);
  EXPECT_EQ(st.bytes, ti->nbytes);
  EXPECT_GT(st.released, 0u);
  EXPECT_EQ(w.tok_embd.dtype(), DType::kQ4_0x8);
  auto bytes = read_file(q4_model_path());
  ASSERT_TRUE(bytes);
  const size_t off = f->data_offset() + ti->offset;
  EXPECT_EQ(std::memcmp(ti->data, bytes->data() + off, ti->nbytes), 0);
  // The repacked copy read with pread equals one read through the mapping (a source file that
  // cannot be opened falls back to it) and one made from the file's bytes in memory.
  ModelWeights v;
  v.tok_embd = f->tensor(*ti);
  v.output = v.tok_embd;
  const MappedSource missing{"/nonexistent/nexus.gguf", source.base};
  repack_weights(v, &missing);
  std::vector<uint8_t> want(ti->nbytes);
  cpu::repack_q4_0x8(bytes->data() + off, want.data(), ti->shape[0], ti->shape[1]);
  EXPECT_EQ(std::memcmp(w.tok_embd.data(), want.data(), want.size()), 0);
  EXPECT_EQ(std::memcmp(v.tok_embd.data(), want.data(), want.size()), 0);
}

// A file replaced on disk after it was mapped: the copy still holds the mapped (old) bytes.
TEST(WeightRepack, AFileReplacedAfterMappingIsNotRead) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "nexus_repack_swap_" + std::to_string(getpid()) + ".gguf";
  const std::string other = path + ".other";
  GenModelOptions o;
  o.shape = parse_model_shape("custom:dim=64,layers=1,heads=4,ffn=96,vocab=300,tied=0").value();
  o.type = ModelFileType::kF16;
  ASSERT_TRUE(write_random_model(o, path).is_ok());
  o.seed = 99;
  ASSERT_TRUE(write_random_model(o, other).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f) << f.status().message();
  auto old_bytes = read_file(path);
  ASSERT_TRUE(old_bytes);
  ASSERT_EQ(std::rename(other.c_str(), path.c_str()), 0);  // the mapping keeps the old inode
  const GgufTensorInfo* ti = f->find_tensor("output.weight");
  ASSERT_NE(ti, nullptr);
  ModelWeights w;
  w.output = f->tensor(*ti);
  const GgufTensorInfo& first = f->tensors().front();
  const MappedSource source{path, first.data - f->data_offset() - first.offset};
  repack_weights(w, &source);
  EXPECT_NE(w.output.data(), ti->data);
  EXPECT_EQ(
      std::memcmp(w.output.data(), old_bytes->data() + f->data_offset() + ti->offset, ti->nbytes),
      0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nexus
