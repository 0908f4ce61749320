// Checkpoint files: round trip, every kind of damage caught with the file named, pruning; the
// metrics log and the loss plot.
#include "nexus/train/checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plot/svg_line_chart.h"
#include "nexus/train/metrics.h"

namespace nexus::train {
namespace {

namespace fs = std::filesystem;

class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "nexus_ckpt_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    s_.model.arch = Arch::kLlama;
    s_.model.arch_name = "llama";
    s_.model.n_vocab = 48, s_.model.dim = 16, s_.model.n_layers = 1, s_.model.n_heads = 2;
    s_.model.n_kv_heads = 1, s_.model.head_dim = 8, s_.model.rope_dim = 8, s_.model.ffn_dim = 24;
    s_.model.n_ctx_train = 8, s_.model.tied_output = false;
    s_.batch = 2, s_.seq = 8, s_.steps = 20, s_.data_path = "d.bin";
    model_ = std::move(TrainModel::create(s_.model, 2, 8, {0.02f, 4, true})).value();
    opt_ = std::move(make_optimizer(*model_, s_.optimizer)).value();
    // Some optimizer state and a step count to round-trip.
    for (float& g : model_->grads()) g = 0.01f;
    opt_->step(model_->params(), model_->grads(), 1e-3f);
    progress_.step = 7, progress_.tokens = 7 * 16;
    progress_.loader = {{1, 2, 3, 0xFFFFFFFFFFFFFFFFull}, 7, 2, 8};
    path_ = checkpoint_path(dir_, 7);
    ASSERT_TRUE(save_checkpoint(path_, s_, progress_, *model_, *opt_, nullptr).is_ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string bytes() const {
    std::ifstream f(path_, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  void write(const std::string& b) const { std::ofstream(path_, std::ios::binary) << b; }
  // The open error, which must name the file.
  std::string open_error() const {
    auto c = Checkpoint::open(path_);
    EXPECT_FALSE(c.is_ok());
    if (c.is_ok()) return "";
    EXPECT_NE(c.status().message().find(path_), std::string::npos) << c.status().message();
    return c.status().message();
  }

  std::string dir_, path_;
  TrainSettings s_;
  TrainProgress progress_;
  std::unique_ptr<TrainModel> model_;
  std::unique_ptr<Optimizer> opt_;
};

TEST_F(CheckpointFile, RoundTrip) {
  EXPECT_EQ(fs::path(path_).filename(), "ckpt-00000007.gguf");
  auto c = Checkpoint::open(path_);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const TrainSettings& s = c.value().settings();
  EXPECT_EQ(s.model.dim, 16);
  EXPECT_EQ(s.model.n_kv_heads, 1);
  EXPECT_FALSE(s.model.tied_output);
  EXPECT_EQ(s.schedule.lr, s_.schedule.lr);
  EXPECT_EQ(s.optimizer.adamw.beta2, s_.optimizer.adamw.beta2);
  EXPECT_EQ(s.data_path, "d.bin");
  EXPECT_EQ(c.value().progress().loader.rng[3], 0xFFFFFFFFFFFFFFFFull);
  EXPECT_EQ(c.value().progress().tokens, 7 * 16);
  EXPECT_EQ(c.value().optimizer_steps(), 1);
  EXPECT_FALSE(c.value().has_tokenizer());
  auto m2 = std::move(TrainModel::create(s.model, 2, 8, {0.02f, 99, true})).value();
  ASSERT_TRUE(c.value().restore_model(*m2).is_ok());
  EXPECT_EQ(
      std::memcmp(m2->params().data(), model_->params().data(), model_->params().size_bytes()), 0);
  auto o2 = std::move(make_optimizer(*m2, s.optimizer)).value();
  ASSERT_TRUE(c.value().restore_optimizer(*o2).is_ok());
  EXPECT_EQ(o2->steps(), 1);
  for (size_t i = 0; i < o2->state().size(); ++i)
    EXPECT_EQ(std::memcmp(o2->state()[i].data.data(), opt_->state()[i].data.data(),
                          opt_->state()[i].data.size_bytes()),
              0);
  // Another model shape is refused with the tensor named.
  ModelConfig other = s.model;
  other.ffn_dim = 32;
  auto m3 = std::move(TrainModel::create(other, 2, 8)).value();
  const Status st = c.value().restore_model(*m3);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("ffn_gate"), std::string::npos) << st.message();
}

// The state-space, hybrid and memory settings travel with the checkpoint (export and --resume
// rebuild the model from them).
TEST_F(CheckpointFile, ArchitectureSettingsRoundTrip) {
  TrainSettings s = s_;
  s.model.ssm_conv = 4, s.model.ssm_inner = 64, s.model.ssm_state = 16, s.model.ssm_dt_rank = 8;
  s.model.ssm_groups = 2, s.model.recurrent = {1, 0, 1};
  s.model.memory_segment = 32, s.model.memory_kind = MemoryKind::kTitans;
  s.model.memory_before_rope = true, s.model.memory_hidden = 24;
  const std::string path = checkpoint_path(dir_, 8);
  ASSERT_TRUE(save_checkpoint(path, s, progress_, *model_, *opt_, nullptr).is_ok());
  auto c = Checkpoint::open(path);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const ModelConfig& m = c.value().settings().model;
  EXPECT_EQ(m.ssm_conv, 4);
  EXPECT_EQ(m.ssm_inner, 64);
  EXPECT_EQ(m.ssm_state, 16);
  EXPECT_EQ(m.ssm_dt_rank, 8);
  EXPECT_EQ(m.ssm_groups, 2);
  EXPECT_EQ(m.recurrent, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(m.memory_segment, 32);
  EXPECT_EQ(m.memory_kind, MemoryKind::kTitans);
  EXPECT_TRUE(m.memory_before_rope);
  EXPECT_EQ(m.memory_hidden, 24);
}

TEST_F(CheckpointFile, FlippedBitsAnywhereFailTheChecksum) {
  const std::string good = bytes();
  // One bit in the last tensor's data (the AdamW second moment), one in the lr value.
  std::string b = good;
  b[b.size() - 40] ^= 0x10;
  write(b);
  EXPECT_NE(open_error().find("checksum mismatch"), std::string::npos);
  b = good;
  const size_t key = b.find("nexus.ckpt.lr");
  ASSERT_NE(key, std::string::npos);
  b[key + 13 + 4 + 2] ^= 0x01;  // key, u32 type, then the f32 value's third byte
  write(b);
  EXPECT_NE(open_error().find("checksum mismatch"), std::string::npos);
  write(good);
  EXPECT_TRUE(Checkpoint::open(path_).is_ok());
}

TEST_F(CheckpointFile, TruncatedEmptyAndForeignFiles) {
  const std::string good = bytes();
  for (size_t keep : {good.size() - 1, good.size() / 2, size_t{100}, size_t{0}}) {
    write(good.substr(0, keep));
    EXPECT_FALSE(open_error().empty()) << keep;
  }
  // A GGUF that is no checkpoint.
  model_->export_gguf(path_);
  EXPECT_NE(open_error().find("not a nexus training checkpoint"), std::string::npos);
}

TEST_F(CheckpointFile, PruneKeepsTheNewestAndRemovesStaleTemporaries) {
  for (int step : {1, 3, 12}) fs::copy_file(path_, checkpoint_path(dir_, step));
  std::ofstream(checkpoint_path(dir_, 13) + ".tmp.999999") << "partial";
  std::ofstream(dir_ + "/notes.txt") << "kept";
  ASSERT_TRUE(prune_checkpoints(dir_, 2).is_ok());
  const std::vector<std::string> left = list_checkpoints(dir_);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0], checkpoint_path(dir_, 7));
  EXPECT_EQ(left[1], checkpoint_path(dir_, 12));  // sorted by step, not by name length
  EXPECT_FALSE(fs::exists(checkpoint_path(dir_, 13) + ".tmp.999999"));
  EXPECT_TRUE(fs::exists(dir_ + "/notes.txt"));
  EXPECT_EQ(latest_checkpoint(dir_).value(), checkpoint_path(dir_, 12));
  fs::create_directories(dir_ + "/empty");
  EXPECT_FALSE(latest_checkpoint(dir_ + "/empty").is_ok());
}

TEST(Metrics, LogResumeAndRead) {
  const std::string path = ::testing::TempDir() + "nexus_metrics_" + std::to_string(::getpid());
  std::remove(path.c_str());
  {
    auto log = std::move(MetricsLog::open(path)).value();
    for (int s = 1; s <= 5; ++s) {
      MetricsRecord r;
      r.step = s, r.loss = 5.0 - s, r.tokens = s * 10;
      if (s == 4) r.val_loss = 1.25;
      ASSERT_TRUE(log->append(r).is_ok());
    }
  }
  std::ofstream(path, std::ios::app) << "{\"step\": 6, \"lo";  // cut by a kill
  auto all = read_metrics(path);
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(all.value().size(), 5u);
  EXPECT_EQ(all.value()[3].val_loss.value_or(-1), 1.25);
  EXPECT_FALSE(all.value()[2].val_loss.has_value());
  EXPECT_EQ(all.value()[4].tokens, 50);
  // Resuming at step 3 drops steps 4, 5 and the partial line, then appends.
  {
    auto log = std::move(MetricsLog::open(path, 3)).value();
    MetricsRecord r;
    r.step = 4, r.loss = 0.5;
    ASSERT_TRUE(log->append(r).is_ok());
  }
  all = read_metrics(path);
  ASSERT_EQ(all.value().size(), 4u);
  EXPECT_EQ(all.value()[3].loss, 0.5);
  EXPECT_EQ(to_json_line(all.value()[3]).rfind("{\"step\":4,", 0), 0u)
      << to_json_line(all.value()[3]);
  std::remove(path.c_str());
  EXPECT_FALSE(read_metrics(path).is_ok());
}

TEST(SvgLineChart, OnePolylinePerSeriesAndEscapedText) {
  LineChart c;
  c.title = "loss <run>";
  c.series.push_back({"train", {1, 2, 3, 4}, {4.0, 3.0, NAN, 2.0}, false});
  c.series.push_back({"val", {2, 4}, {3.5, 2.5}, true});
  c.series.push_back({"empty", {}, {}, false});
  const std::string svg = render_line_chart_svg(c);
  size_t n = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1))
    ++n;
  EXPECT_EQ(n, 2u);
  EXPECT_NE(svg.find("loss &lt;run&gt;"), std::string::npos);
  // The train line has 3 finite points.
  const size_t at = svg.find("points=\"");
  const std::string pts = svg.substr(at + 8, svg.find('"', at + 8) - at - 8);
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 3);
  c.series[0].y.pop_back();
  EXPECT_THROW(render_line_chart_svg(c), Error);
}

}  // namespace
}  // namespace nexus::train
