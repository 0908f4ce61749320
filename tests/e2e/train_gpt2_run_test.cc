// gpt2 training end to end. Library: the tiny gpt2 fixture, fine-tuned with gradient
// checkpointing on a repeated sentence, exported, and run by `nexus run`, whose greedy
// continuation of the prompt must follow the training text. CLI: `nexus train --init` on the
// fixture with checkpoints and resume, `nexus export`, `nexus run`. The fixture's vocabulary is
// ASCII 33-95 (one token per character, no space), hence the spelling of the text.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "e2e/cli_util.h"
#include "nexus/io/gguf.h"
#include "nexus/tokenizer.h"
#include "test_paths.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/train_model.h"

namespace nexus::test {
namespace {

TEST(TrainGpt2, FineTunedExportRunsWithNexusRun) {
  const std::string fixture = fixtures_dir() + "/train/gpt2_tied.gguf";
  const std::string sentence = "THE_CAT_SAT_ON_THE_MAT_AND_THE_DOG_RAN_TO_THE_LOG.";
  auto tok = Tokenizer::load(fixture);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  std::string text;
  for (int i = 0; i < 8; ++i) text += sentence;
  const std::vector<int32_t> ids = tok.value()->encode(text, false);
  const int64_t b = 4, t = 16;  // the fixture has 16 positions
  ASSERT_GT(static_cast<int64_t>(ids.size()), t + b * 3);
  auto m = train::TrainModel::from_gguf(fixture, b, t, {.recompute_blocks = true});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  train::TrainModel& model = **m;
  train::AdamW opt(model, {});
  std::vector<int32_t> x(b * t), y(b * t);
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 200; ++step) {
    for (int64_t s = 0; s < b; ++s) {
      const int64_t start = (step * b + s) * 3 % (static_cast<int64_t>(ids.size()) - t - 1);
      for (int64_t i = 0; i < t; ++i) {
        x[s * t + i] = ids[start + i];
        y[s * t + i] = ids[start + i + 1];
      }
    }
    model.zero_grad();
    last = model.forward(x, y, b, t);
    if (step == 0) first = last;
    model.backward();
    train::clip_grad_norm(model.grads(), 1.0f);
    opt.step(model.params(), model.grads(), 1e-2f);
  }
  EXPECT_LT(last, 0.1f * first) << first << " -> " << last;
  std::printf("gpt2 fine-tune: loss %.3f -> %.3f\n", first, last);

  const std::string path =
      ::testing::TempDir() + "nexus_gpt2_e2e_" + std::to_string(::getpid()) + ".gguf";
  auto src = GgufFile::open(fixture);
  ASSERT_TRUE(src.is_ok());
  ASSERT_TRUE(model.export_gguf(path, &src.value()).is_ok());
  CliResult g = run_cli("run -m " + quoted(path) + " -p 'THE_CAT' -n 8 --temp 0");
  std::filesystem::remove(path);
  ASSERT_EQ(g.code, 0) << g.output;
  const std::string out = g.out.substr(0, g.out.find('\n'));
  EXPECT_GE(out.size(), 8u) << g.output;
  std::printf("nexus run on the export: %s\n", out.c_str());
  EXPECT_NE(text.find(out), std::string::npos) << "'" << out << "' is not in the training text";
}

// `nexus train --init` on a gpt2 file: checkpoints, a resumed run that ends byte-identical to the
// straight one, `nexus export` of the checkpoint, and `nexus run` on the export.
TEST(TrainGpt2, CliFineTuneResumeAndExport) {
  const std::string dir = ::testing::TempDir() + "nexus_gpt2_cli_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/text.txt");
    for (int i = 0; i < 50; ++i) f << "THE_CAT_SAT_ON_THE_MAT.";
  }
  const std::string init = fixtures_dir() + "/train/gpt2_tied.gguf";
  CliResult r = run_cli("train --init " + quoted(init) + " --data " + quoted(dir + "/text.txt") +
                        " -o " + quoted(dir + "/a.gguf") + " --batch 4 --seq 16 --steps 6" +
                        " --lr 1e-2 -t 1 --checkpoint-dir " + quoted(dir + "/ck") +
                        " --checkpoint-interval 3");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_cli("train --resume " + quoted(dir + "/ck/ckpt-00000003.gguf") + " -o " +
              quoted(dir + "/b.gguf") + " -t 1");
  ASSERT_EQ(r.code, 0) << r.output;
  auto bytes = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string a = bytes(dir + "/a.gguf");
  EXPECT_GT(a.size(), 10000u);
  EXPECT_TRUE(a == bytes(dir + "/b.gguf")) << "the resumed run's export differs";
  r = run_cli("export --checkpoint " + quoted(dir + "/ck") + " -o " + quoted(dir + "/e.gguf"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(a == bytes(dir + "/e.gguf")) << "export of the last checkpoint differs";
  r = run_cli("run -m " + quoted(dir + "/e.gguf") + " -p THE_ -n 4 --temp 0");
  EXPECT_EQ(r.code, 0) << r.output;
  // Too long a sequence for the 16 learned positions: a clear error.
  r = run_cli("train --init " + quoted(init) + " --data " + quoted(dir + "/text.txt") + " -o " +
              quoted(dir + "/c.gguf") + " --seq 32 --steps 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("position table has 16 rows"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nexus::test
