// `nexus train` end to end: a tiny model trained on a short repetitive text lowers its loss, and
// the exported GGUF generates text with `nexus run` made of the training text's words.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <utility>

#include "e2e/cli_util.h"
#include "test_paths.h"

namespace nexus::test {
namespace {

TEST(TrainCli, LossDecreasesAndTheExportRuns) {
  const std::string dir = ::testing::TempDir() + "nexus_train_e2e_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string sentence = "the cat sat on the mat and the dog ran to the log";
  {
    std::ofstream f(dir + "/text.txt");
    for (int i = 0; i < 40; ++i) f << sentence << " ";
  }
  const std::string tok = fixtures_dir() + "/train/llama_tied.gguf";
  const std::string model = dir + "/m.gguf";
  CliResult r = run_cli("train --shape 32,2,4,2,64 --tokenizer " + quoted(tok) + " --data " +
                        quoted(dir + "/text.txt") + " --out " + quoted(model) +
                        " --batch 4 --seq 32 --steps 120 --lr 1e-2 --warmup 5 -t 1");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<double> losses = step_losses(r.err);
  ASSERT_EQ(losses.size(), 120u) << r.err;
  EXPECT_GT(losses.front(), 3.0);  // about ln(64) at initialisation
  EXPECT_LT(losses.back(), 0.25 * losses.front()) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos);
  EXPECT_NE(r.err.find("eta"), std::string::npos);

  CliResult g = run_cli("run -m " + quoted(model) + " -p 'the cat' -n 16 --temp 0");
  ASSERT_EQ(g.code, 0) << g.output;
  std::set<std::string> vocab;
  std::istringstream words(sentence);
  for (std::string w; words >> w;) vocab.insert(w);
  // Every generated word but the last (cut off at -n tokens) is a word of the training text.
  std::istringstream gen(g.out.substr(0, g.out.find('\n')));
  std::vector<std::string> out_words;
  for (std::string w; gen >> w;) out_words.push_back(w);
  const int n_words = static_cast<int>(out_words.size()) - 1;
  for (int i = 0; i < n_words; ++i)
    EXPECT_TRUE(vocab.count(out_words[i])) << "'" << out_words[i] << "' in " << g.out;
  EXPECT_GE(n_words, 4) << g.out;

  // Fine-tuning the export (--init, its own tokenizer) starts from the trained loss, not ln 64.
  CliResult f =
      run_cli("train --init " + quoted(model) + " --data " + quoted(dir + "/text.txt") + " --out " +
              quoted(dir + "/ft.gguf") + " --batch 2 --seq 32 --steps 3 --lr 1e-4 -t 2");
  ASSERT_EQ(f.code, 0) << f.output;
  const std::vector<double> ft = step_losses(f.err);
  ASSERT_EQ(ft.size(), 3u) << f.err;
  EXPECT_LT(ft.front(), 2.0 * losses.back() + 0.1) << f.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/ft.gguf"));
  std::filesystem::remove_all(dir);
}

TEST(TrainCli, ClearErrors) {
  CliResult r = run_cli("train --data /nonexistent --out /tmp/x.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("exactly one of --shape"), std::string::npos) << r.err;
  r = run_cli("train --shape 32,2,4,2,64 --tokenizer " +
              quoted(fixtures_dir() + "/train/llama_tied.gguf") +
              " --data /nonexistent --out /tmp/x.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot read --data"), std::string::npos) << r.err;
  // An empty text, and one too short for a window: each named by its own path (the short one was
  // named after the removed temporary token file it was tokenized into).
  const std::string dir = ::testing::TempDir();
  const std::string empty = dir + "/nexus_train_empty.txt",
                    shorter = dir + "/nexus_train_short.txt";
  std::ofstream(empty).close();
  std::ofstream(shorter) << "To be.";
  const std::string shape = "train --shape 32,2,4,2,64 --tokenizer " +
                            quoted(fixtures_dir() + "/train/llama_tied.gguf") + " --seq 16 --data ";
  r = run_cli(shape + quoted(empty) + " -o " + quoted(dir + "/nexus_train_x.gguf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--data " + empty + " holds no text (0 bytes)"), std::string::npos) << r.err;
  r = run_cli(shape + quoted(shorter) + " -o " + quoted(dir + "/nexus_train_x.gguf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'" + shorter + "' holds "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fewer than one window"), std::string::npos) << r.err;
  std::remove(empty.c_str());
  std::remove(shorter.c_str());
}

// A learning rate, warmup or clip that makes no run is a usage error before any data is read:
// a negative or NaN rate used to train (the loss climbing, or every weight NaN) and write the
// model.
TEST(TrainCli, ScheduleAndClipFlagsAreChecked) {
  const std::string dir = ::testing::TempDir() + "nexus_train_flags_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/m.gguf";
  const std::string base = "train --shape 32,2,4,2,64 --tokenizer " +
                           quoted(fixtures_dir() + "/train/llama_tied.gguf") +
                           " --data /nonexistent --steps 2 -t 1 --out " + quoted(out) + " ";
  const std::pair<const char*, const char*> cases[] = {
      {"--lr -1", "--lr and --min-lr must be finite and >= 0"},
      {"--lr nan", "--lr and --min-lr must be finite and >= 0"},
      {"--lr inf", "--lr and --min-lr must be finite and >= 0"},
      {"--min-lr -0.001", "--lr and --min-lr must be finite and >= 0"},
      {"--warmup -5", "--warmup must be >= 0"},
      {"--clip -1", "--clip must be finite and >= 0"},
      {"--clip nan", "--clip must be finite and >= 0"}};
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(flags);
    CliResult r = run_cli(base + flags);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("--data"), std::string::npos) << "checked before the data: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  std::filesystem::remove_all(dir);
}

// -o naming an input (the data, the tokenizer, the model fine-tuned) would replace it: refused
// before anything runs, the input left as it was.
TEST(TrainCli, OutputThatIsAnInputIsRefused) {
  const std::string dir = ::testing::TempDir() + "nexus_train_out_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string text = dir + "/text.txt", content = "the cat sat on the mat\n";
  std::ofstream(text) << content;
  const std::string tok = quoted(fixtures_dir() + "/train/llama_tied.gguf");
  CliResult r = run_cli("train --shape 32,2,4,2,64 --tokenizer " + tok + " --data " + quoted(text) +
                        " --steps 1 -t 1 -o " + quoted(text));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.err.find("writing it would replace the input"), std::string::npos) << r.err;
  std::ifstream in(text);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
            content);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nexus::test
