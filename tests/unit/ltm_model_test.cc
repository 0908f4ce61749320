// nexus-ltm: in training, the model's gradients (through the memory, its gate and the segments'
// attention) against finite differences, the memory-saving modes giving the default's gradients,
// and the long-term memory as the only path between segments; in inference, the exported model's
// logits equal training's whether the sequence comes in one call, a token at a time or in uneven
// pieces, the cache and memory do not grow with the context, and a snapshot at a segment boundary
// resumes bit-exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "nexus/compress/gguf_convert.h"
#include "nexus/compress/memory_reduce.h"
#include "nexus/context.h"
#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "nexus/train/train_model.h"
#include "train_grad_util.h"

namespace nexus::train {
namespace {

ModelConfig ltm_config(MemoryKind kind = MemoryKind::kInfini, bool before_rope = false,
                       int64_t hidden = 0) {
  ModelConfig c;
  c.arch = Arch::kLtm;
  c.arch_name = "nexus-ltm";
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 8;
  c.rope_dim = 8;
  c.ffn_dim = 32;
  c.n_vocab = 20;
  c.n_ctx_train = 64;
  c.memory_segment = 4;
  c.memory_kind = kind;
  c.memory_before_rope = before_rope;
  c.memory_hidden = hidden;
  return c;
}

struct Data {
  std::vector<int32_t> tokens, targets;
};
Data data(int64_t n, int seed = 0) {
  Data d;
  for (int64_t i = 0; i < n; ++i) {
    d.tokens.push_back(static_cast<int32_t>((i * 7 + 3 + seed) % 20));
    d.targets.push_back(static_cast<int32_t>((i * 5 + 1) % 20));
  }
  return d;
}

std::unique_ptr<TrainModel> model(const TrainOptions& o = {}, MemoryKind kind = MemoryKind::kInfini,
                                  bool before_rope = false, int64_t hidden = 0) {
  auto m = TrainModel::create(ltm_config(kind, before_rope, hidden), 2, 12, {0.4f, 3, true}, o);
  EXPECT_TRUE(m) << m.status().message();
  // A gate away from the even mix, so that both paths and the gate's gradient are exercised.
  // Titans' rates where they move the loss enough for finite differences in f32: momentum 0.5,
  // step 0.73, forgetting 0.27.
  for (const ParamInfo& t : m.value()->tensors())
    for (int64_t h = 0; h < t.numel; ++h) {
      float& p = m.value()->params()[t.offset + h];
      if (t.name.ends_with(".memory_gate")) p = 0.3f - 0.5f * h;
      if (t.name.ends_with(".memory_eta")) p = 0.0f;
      if (t.name.ends_with(".memory_theta")) p = 1.0f;
      if (t.name.ends_with(".memory_alpha")) p = -1.0f;
    }
  return std::move(m).value();
}

// Each memory kind, reading q and k after RoPE (the default) or before it; Titans' memory
// linear (hidden 0) or deep.
struct LtmVariant {
  MemoryKind kind;
  bool before_rope;
  int64_t hidden = 0;
};
class LtmKinds : public ::testing::TestWithParam<LtmVariant> {
 protected:
  std::unique_ptr<TrainModel> model(const TrainOptions& o = {}) const {
    return train::model(o, GetParam().kind, GetParam().before_rope, GetParam().hidden);
  }
};

TEST_P(LtmKinds, GradientsMatchFiniteDifferences) {
  auto m = model();
  const Data d = data(24);
  m->zero_grad();
  m->forward(d.tokens, d.targets, 2, 12);
  m->backward();
  auto loss = [&] { return static_cast<double>(m->forward(d.tokens, d.targets, 2, 12, false)); };
  std::vector<std::string> names = {"blk.0.memory_gate", "blk.0.attn_k.weight",
                                    "blk.0.attn_v.weight", "blk.1.attn_q.weight",
                                    "blk.1.memory_gate"};
  // (The deep memory's loss curves sharply in its rates: smaller differences there.)
  const bool deep = GetParam().hidden > 0;
  if (GetParam().kind == MemoryKind::kTitans)
    for (const char* r : {"blk.0.memory_eta", "blk.0.memory_theta",
                          deep ? "blk.0.memory_alpha" : "blk.1.memory_alpha"})
      names.emplace_back(r);
  if (deep)
    for (const char* w : {"blk.0.memory_w1", "blk.1.memory_w2"}) names.emplace_back(w);
  for (const std::string& name_s : names) {
    const char* name = name_s.c_str();
    Tensor p = m->param(name), g = m->grad(name);
    std::vector<float> x(p.data_as<float>(), p.data_as<float>() + p.numel());
    const std::vector<float> analytic(g.data_as<float>(), g.data_as<float>() + g.numel());
    float* live = p.data_as<float>();
    const bool rate =
        name_s.ends_with("eta") || name_s.ends_with("theta") || name_s.ends_with("alpha");
    const double err = fd_error(
        name, x, analytic,
        [&] {
          std::memcpy(live, x.data(), x.size() * sizeof(float));
          return loss();
        },
        rate && !deep ? 1e-2f : 1e-3f);
    std::memcpy(live, x.data(), x.size() * sizeof(float));
    EXPECT_LT(err, 2e-2) << name;
  }
}

TEST_P(LtmKinds, MemorySavingModesGiveTheDefaultsGradients) {
  const Data d = data(24, 1);
  std::vector<float> want;
  for (int mode = 0; mode < 3; ++mode) {
    TrainOptions o;
    o.recompute_blocks = mode == 1;
    o.selective_recompute = mode == 2;
    auto m = model(o);
    m->zero_grad();
    m->forward(d.tokens, d.targets, 2, 12);
    m->backward();
    std::vector<float> g(m->grads().begin(), m->grads().end());
    if (mode == 0)
      want = g;
    else
      EXPECT_EQ(g, want) << "mode " << mode;
  }
}

TEST(LtmModel, TheMemoryIsTheOnlyPathBetweenSegments) {
  auto m = model();
  Data d = data(24, 2);
  m->forward(d.tokens, d.targets, 2, 12, false);
  const std::vector<float> base = m->logits();
  d.tokens[1] = (d.tokens[1] + 5) % 20;  // the first segment of the first sequence
  m->forward(d.tokens, d.targets, 2, 12, false);
  const std::vector<float> changed = m->logits();
  const int64_t v = 20;
  auto differs = [&](int64_t row) {
    return std::memcmp(base.data() + row * v, changed.data() + row * v, v * sizeof(float)) != 0;
  };
  EXPECT_FALSE(differs(0));  // before the token
  EXPECT_TRUE(differs(2));   // its own segment
  EXPECT_TRUE(differs(5));   // later segments, through the memory
  EXPECT_TRUE(differs(11));
  EXPECT_FALSE(differs(12));  // the other sequence

  // With the gate shut (all attention), later segments do not see it.
  for (const ParamInfo& t : m->tensors())
    if (t.name.ends_with(".memory_gate"))
      for (int64_t h = 0; h < t.numel; ++h) m->params()[t.offset + h] = -200.0f;
  d = data(24, 2);
  m->forward(d.tokens, d.targets, 2, 12, false);
  const std::vector<float> shut = m->logits();
  d.tokens[1] = (d.tokens[1] + 5) % 20;
  m->forward(d.tokens, d.targets, 2, 12, false);
  const std::vector<float> shut_changed = m->logits();
  EXPECT_EQ(0,
            std::memcmp(shut.data() + 4 * v, shut_changed.data() + 4 * v, 8 * v * sizeof(float)));
}

TEST(LtmModel, SequencesMustBeWholeSegments) {
  auto m = TrainModel::create(ltm_config(), 1, 10);
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("whole number of memory segments of 4"), std::string::npos)
      << m.status().message();
}

// Logits [n][vocab] of `tokens` fed to a context in pieces of the given sizes (0: one call).
std::vector<float> infer(const Model& m, const std::vector<int32_t>& tokens, int64_t piece,
                         int64_t n_ctx = 64, size_t* kv_bytes = nullptr,
                         DType kv_type = DType::kF32) {
  ContextOptions o;
  o.n_ctx = n_ctx;
  o.kv_type = kv_type;
  auto ctx = Context::create(m, o);
  EXPECT_TRUE(ctx) << ctx.status().message();
  std::vector<float> all, out;
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t i0 = 0; i0 < n;) {
    const int64_t i1 = piece ? std::min(n, i0 + piece + (i0 % 3)) : n;  // uneven pieces
    Batch b;
    for (int64_t i = i0; i < i1; ++i) b.add(tokens[i], static_cast<int32_t>(i), 0, true);
    EXPECT_TRUE(ctx.value()->decode(b, &out));
    all.insert(all.end(), out.begin(), out.end());
    i0 = i1;
  }
  if (kv_bytes) *kv_bytes = ctx.value()->kv_bytes();
  return all;
}

TEST_P(LtmKinds, InferenceGivesTrainingsLogitsInAnyPieces) {
  auto m = model();
  const Data d = data(24, 3);
  m->forward(d.tokens, d.targets, 2, 12, false);
  const std::vector<float> want = m->logits();
  const std::string path = ::testing::TempDir() + "/ltm_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(m->export_gguf(path));
  auto loaded = Model::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ(loaded.value()->config().memory_segment, 4);
  EXPECT_EQ(loaded.value()->config().memory_kind, GetParam().kind);
  EXPECT_EQ(loaded.value()->config().memory_before_rope, GetParam().before_rope);
  EXPECT_EQ(loaded.value()->config().memory_hidden, GetParam().hidden);
  const std::vector<int32_t> first(d.tokens.begin(), d.tokens.begin() + 12);
  for (int64_t piece : {0, 1, 2, 5}) {
    const std::vector<float> got = infer(*loaded.value(), first, piece);
    ASSERT_EQ(got.size(), 12u * 20);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-4) << "piece " << piece << " at " << i;
  }
  // The segment's write reads the cache (its values, and its keys when the memory reads them
  // rotated): an f16 cache moves the logits by its rounding (0.001-0.005 here), as it does the
  // attention's.
  const std::vector<float> got = infer(*loaded.value(), first, 1, 64, nullptr, DType::kF16);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-2) << i;
}

INSTANTIATE_TEST_SUITE_P(Memory, LtmKinds,
                         ::testing::Values(LtmVariant{MemoryKind::kInfini, false},
                                           LtmVariant{MemoryKind::kTitans, false},
                                           LtmVariant{MemoryKind::kInfini, true},
                                           LtmVariant{MemoryKind::kTitans, true},
                                           LtmVariant{MemoryKind::kTitans, false, 6},
                                           LtmVariant{MemoryKind::kTitans, true, 6}),
                         [](const auto& info) {
                           return std::string(info.param.kind == MemoryKind::kTitans ? "titans"
                                                                                     : "infini") +
                                  (info.param.hidden > 0 ? "_deep" : "") +
                                  (info.param.before_rope ? "_before_rope" : "");
                         });

// The exported deep-memory model rewritten with `edit` applied to its metadata (and F16 initial
// weights when asked), then loaded: the error, or empty when it loads.
std::string load_edited(void (*edit)(GgufWriter&), bool f16_weights = false) {
  auto m = train::model({}, MemoryKind::kTitans, false, 6);
  const std::string path = ::testing::TempDir() + "/ltm_edit_" + std::to_string(::getpid());
  EXPECT_TRUE(m->export_gguf(path + ".gguf"));
  auto in = GgufFile::open(path + ".gguf");
  EXPECT_TRUE(in) << in.status().message();
  GgufWriter w;
  w.copy_metadata(in.value());
  edit(w);
  std::vector<uint16_t> half;
  for (const GgufTensorInfo& t : in.value().tensors()) {
    if (f16_weights && t.name.ends_with(".memory_w1")) {
      half.assign(t.nbytes / 4, 0x3c00);  // 1.0 in F16
      w.add_tensor(t.name, DType::kF16, t.shape, half.data());
    } else {
      w.add_tensor(t.name, t.dtype, t.shape, t.data);
    }
  }
  EXPECT_TRUE(w.write(path + "_2.gguf"));
  auto loaded = Model::load(path + "_2.gguf");
  std::filesystem::remove(path + ".gguf");
  std::filesystem::remove(path + "_2.gguf");
  return loaded ? std::string() : loaded.status().message();
}

TEST(LtmModel, TheDeepMemorysMetadataIsChecked) {
  EXPECT_EQ(load_edited([](GgufWriter&) {}), "");
  EXPECT_NE(load_edited([](GgufWriter& w) {
              w.set_u32("nexus-ltm.memory.depth", 3);
            }).find("memory.depth is 3, expected 1 (linear) or 2 (an MLP)"),
            std::string::npos);
  EXPECT_NE(load_edited([](GgufWriter& w) {
              w.set_string("nexus-ltm.memory.kind", "infini");
            }).find("memory.depth 2 needs memory.kind 'titans'"),
            std::string::npos);
  EXPECT_NE(load_edited([](GgufWriter& w) {
              w.set_u32("nexus-ltm.memory.hidden", 0);
            }).find("memory.hidden is missing or out of range"),
            std::string::npos);
  EXPECT_NE(load_edited([](GgufWriter&) {}, true).find("'blk.0.memory_w1' must be F32, is F16"),
            std::string::npos);
  // Slot reduction keeps some of the hidden units: no more than there are, and the weights must be
  // cut to them.
  EXPECT_NE(load_edited([](GgufWriter& w) {
              w.set_i32_array("nexus-ltm.memory.slots", {99, 99});
            }).find("outside 1..6 (the deep memory's hidden units)"),
            std::string::npos);
  const std::string cut = load_edited([](GgufWriter& w) {
    w.set_i32_array("nexus-ltm.memory.slots", {4, 4});
  });
  EXPECT_NE(cut.find("'blk.0.memory_w1' has shape 1x8x6, expected 1x8x4"), std::string::npos)
      << cut;
}

TEST(LtmModel, TheDeepMemoryIsNotQuantized) {
  // Conversion and quantization keep the weights the kernels read as f32.
  for (const char* name : {"blk.3.memory_w1", "blk.3.memory_w2", "blk.3.memory_proj"})
    EXPECT_TRUE(keeps_f32(GgufTensorInfo{name, DType::kF32, {2, 8, 16}})) << name;
  EXPECT_FALSE(keeps_f32(GgufTensorInfo{"blk.3.attn_q.weight", DType::kF32, {16, 16}}));
}

TEST_P(LtmKinds, CacheAndMemoryDoNotGrowWithTheContext) {
  auto m = model();
  const std::string path =
      ::testing::TempDir() + "/ltm_ctx_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(m->export_gguf(path));
  auto loaded = Model::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back((i * 13 + 7) % 20);
  size_t short_bytes = 0, long_bytes = 0;
  infer(*loaded.value(), std::vector<int32_t>(tokens.begin(), tokens.begin() + 16), 0, 64,
        &short_bytes);
  const std::vector<float> logits = infer(*loaded.value(), tokens, 7, 4096, &long_bytes);
  EXPECT_EQ(short_bytes, long_bytes);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST_P(LtmKinds, ASnapshotAtASegmentBoundaryResumesBitExactly) {
  auto m = model();
  const std::string path =
      ::testing::TempDir() + "/ltm_snap_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(m->export_gguf(path));
  auto loaded = Model::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded);
  ContextOptions o;
  o.n_ctx = 64;
  o.n_seq = 2;
  auto ctx = Context::create(*loaded.value(), o);
  ASSERT_TRUE(ctx);
  Context& c = *ctx.value();
  auto feed = [&](int seq, int32_t from, int32_t to, std::vector<float>* out) {
    Batch b;
    for (int32_t i = from; i < to; ++i) b.add((i * 11 + 1) % 20, i, seq, true);
    return c.decode(b, out);
  };
  std::vector<float> out, a, b2;
  ASSERT_TRUE(feed(0, 0, 8, &out));
  RecurrentSnapshot snap;
  ASSERT_TRUE(c.save_state(0, &snap));
  EXPECT_EQ(snap.pos, 8);
  ASSERT_TRUE(feed(0, 8, 14, &a));
  ASSERT_TRUE(c.restore_state(1, snap));
  ASSERT_TRUE(feed(1, 8, 14, &b2));
  EXPECT_EQ(a, b2);
  // Mid-segment there is no snapshot; rolling back inside the segment is fine, past it is not.
  EXPECT_FALSE(c.save_state(0, &snap));
  c.clear_seq(0, 13);
  EXPECT_EQ(c.seq_len(0), 13);
  ASSERT_TRUE(feed(0, 13, 14, &out));
  c.clear_seq(0, 9);  // segment 2 starts at 12
  const Status past = feed(0, 9, 10, &out);
  EXPECT_NE(past.message().find("rolled back past a segment"), std::string::npos) << past.message();
}

}  // namespace
}  // namespace nexus::train
