// `nexus train-tokenizer` and `nexus tokenize-data` as processes: a trained vocabulary that the
// tokenizer reads back, byte-identical reruns, train/val token files, and usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "e2e/cli_util.h"
#include "nexus/io/mapped_file.h"
#include "nexus/tokenizer.h"
#include "nexus/train/token_file.h"

namespace nexus {
namespace {

using test::quoted;
using test::run_cli;

std::string temp(const std::string& name) { return ::testing::TempDir() + "traindata_" + name; }

// About 60 KB of lines; the last ones differ so a validation split is recognisable.
std::string write_corpus() {
  std::string s;
  for (int i = 0; i < 1500; ++i)
    s += "Line " + std::to_string(i) + ": the cat sat on the mat, and it's fine.\n";
  const std::string path = temp("corpus.txt");
  EXPECT_TRUE(write_file_atomic(path, s.data(), s.size()));
  return path;
}

TEST(TrainDataCli, TrainTokenizerThenTokenizeData) {
  const std::string corpus = write_corpus();
  const std::string tok = temp("tok.gguf"), tok2 = temp("tok2.gguf");
  auto r = run_cli("train-tokenizer -i " + quoted(corpus) + " --vocab 300 -o " + quoted(tok) +
                   " --special '<|pad|>'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("300 tokens"), std::string::npos) << r.err;
  r = run_cli("train-tokenizer -i " + quoted(corpus) + " --vocab 300 -o " + quoted(tok2) +
              " --special '<|pad|>'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_file(tok).value(), read_file(tok2).value());  // deterministic

  auto t = Tokenizer::load(tok);
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t.value()->n_vocab(), 300);
  EXPECT_EQ(t.value()->token_text(299), "<|pad|>");
  EXPECT_EQ(t.value()->eos_id(), 298);
  r = run_cli("tokenize -m " + quoted(tok) + " -p 'the cat<|endoftext|>' --ids");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.out.find(" 298"), std::string::npos) << r.out;

  const std::string data = temp("data.bin"), val = temp("data.val.bin");
  r = run_cli("tokenize-data -i " + quoted(corpus) + " -m " + quoted(tok) + " -o " + quoted(data) +
              " --val-fraction 0.1 --append-eos");
  ASSERT_EQ(r.code, 0) << r.output;
  auto train_file = TokenFile::open(data);
  auto val_file = TokenFile::open(val);
  ASSERT_TRUE(train_file) << train_file.status().message();
  ASSERT_TRUE(val_file) << val_file.status().message();
  EXPECT_EQ(train_file->header().tokenizer_hash, tokenizer_fingerprint(*t.value()));
  EXPECT_EQ(train_file->vocab_size(), 300u);
  EXPECT_EQ(train_file->header().token_bytes, 2u);
  EXPECT_EQ(train_file->header().eos_id, 298u);

  // The two files hold the text's tokens, split at a line start, EOS at the very end.
  const std::string text = read_file(corpus).value();
  const std::vector<int32_t> all = t.value()->encode(text, false);
  ASSERT_EQ(train_file->size() + val_file->size(), all.size() + 1);
  std::vector<int32_t> tv(train_file->size()), vv(val_file->size());
  train_file->copy(0, tv);
  val_file->copy(0, vv);
  EXPECT_EQ(vv.back(), 298);
  vv.pop_back();
  const std::string train_text = t.value()->decode(tv), val_text = t.value()->decode(vv);
  EXPECT_EQ(train_text + val_text, text);
  EXPECT_EQ(train_text.back(), '\n');
  EXPECT_NEAR(static_cast<double>(val_text.size()) / static_cast<double>(text.size()), 0.1, 0.01);
}

TEST(TrainDataCli, ExistingVocabulariesOnTinyShakespeare) {
  constexpr const char* kText = "data/tinyshakespeare.txt";
  NEXUS_REQUIRE_SHARED(kText);
  NEXUS_REQUIRE_SHARED("vocab/gpt2-hf/tokenizer.json");
  NEXUS_REQUIRE_SHARED("vocab/qwen3-hf/tokenizer.json");
  // GPT-2's vocabulary from a tokenizer.json directory: nanoGPT's count (301,966 + 36,059).
  const std::string data = temp("gpt2.bin");
  auto r = run_cli("tokenize-data -i " + quoted(test::shared_path(kText)) + " -m " +
                   quoted(test::shared_path("vocab/gpt2-hf")) + " -o " + quoted(data));
  ASSERT_EQ(r.code, 0) << r.output;
  auto f = TokenFile::open(data);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->size(), 338025u);
  EXPECT_EQ(f->header().token_bytes, 2u);
  EXPECT_EQ(f->vocab_size(), 50257u);
  // Qwen3's 151k vocabulary needs 32-bit ids.
  const std::string q = temp("qwen3.bin");
  r = run_cli("tokenize-data -i " + quoted(test::shared_path(kText)) + " -m " +
              quoted(test::shared_path("vocab/qwen3-hf/tokenizer.json")) + " -o " + quoted(q));
  ASSERT_EQ(r.code, 0) << r.output;
  auto g = TokenFile::open(q);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->header().token_bytes, 4u);
  EXPECT_GT(g->vocab_size(), 65535u);
}

TEST(TrainDataCli, ErrorsAreOneClearLine) {
  const std::string corpus = write_corpus();
  auto r = run_cli("train-tokenizer -i " + quoted(temp("missing.txt")) + " --vocab 300 -o " +
                   quoted(temp("x.gguf")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nexus train-tokenizer: error: cannot open"), std::string::npos) << r.err;
  r = run_cli("train-tokenizer -i " + quoted(corpus) + " --vocab 100 -o " + quoted(temp("x.gguf")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("below the 257 tokens"), std::string::npos) << r.err;
  r = run_cli("train-tokenizer -i " + quoted(corpus) + " -o " + quoted(temp("x.gguf")));
  EXPECT_EQ(r.code, 2);

  const std::string empty = temp("empty.txt");
  ASSERT_TRUE(write_file_atomic(empty, "", 0));
  const std::string tok = temp("err_tok.gguf");
  ASSERT_EQ(run_cli("train-tokenizer -i " + quoted(corpus) + " --vocab 280 -o " + quoted(tok)).code,
            0);
  r = run_cli("tokenize-data -i " + quoted(empty) + " -m " + quoted(tok) + " -o " +
              quoted(temp("e.bin")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the input is empty"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(temp("e.bin")));
  r = run_cli("tokenize-data -i " + quoted(corpus) + " -m " + quoted(temp("nope.gguf")) + " -o " +
              quoted(temp("e.bin")));
  EXPECT_EQ(r.code, 1);
  r = run_cli("tokenize-data -i " + quoted(corpus) + " -m " + quoted(tok) + " -o " +
              quoted(temp("e.bin")) + " --val-fraction 0.9");
  EXPECT_EQ(r.code, 2) << r.output;
  // One line without a line break: nothing to split at, and neither file is written.
  const std::string one_line = temp("one_line.txt");
  ASSERT_TRUE(write_file_atomic(one_line, "no newline here", 15));
  r = run_cli("tokenize-data -i " + quoted(one_line) + " -m " + quoted(tok) + " -o " +
              quoted(temp("ol.bin")) + " --val-fraction 0.2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no line break to split at"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(temp("ol.bin")));
  EXPECT_FALSE(std::filesystem::exists(temp("ol.val.bin")));
  // An output naming an input (the corpus, the tokenizer; the validation split's file too) would
  // replace it: refused, and the corpus is left as it was.
  std::ifstream in(corpus, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string corpus_val = corpus + ".val";  // the split's name for an -o not ending .bin
  for (const std::string& cmd :
       {"tokenize-data -i " + quoted(corpus) + " -m " + quoted(tok) + " -o " + quoted(corpus),
        "tokenize-data -i " + quoted(corpus) + " -m " + quoted(tok) + " -o " + quoted(tok),
        "train-tokenizer -i " + quoted(corpus) + " --vocab 280 -o " + quoted(corpus)}) {
    r = run_cli(cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.err.find("writing it would replace the input"), std::string::npos) << r.err;
  }
  std::ifstream again(corpus, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()),
            text);
  EXPECT_FALSE(std::filesystem::exists(corpus_val));
}

}  // namespace
}  // namespace nexus

namespace nexus {
namespace {

// `train --loss-after`: each line a sample, trained on what follows the text; the setting is in
// the checkpoint, so a resume goes on with it; a line without the text is a one-line error.
TEST(TrainDataCli, TrainsOnAnswersOnlyAndResumesSo) {
  const std::string demo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "Who speaks " + std::to_string(i) + "? ROMEO speaks, and JULIET hears.\n";
  const std::string data = temp("answers.txt"), ckpt = temp("answers_ckpt");
  ASSERT_TRUE(write_file_atomic(data, text.data(), text.size()));
  std::filesystem::remove_all(ckpt);
  const std::string flags = "train --shape 32,2,2,2,64 --tokenizer " + quoted(demo) + " --data " +
                            quoted(data) + " --batch 2 -t 1 --checkpoint-dir " + quoted(ckpt);
  auto r = run_cli(flags + " --seq 32 --steps 2 --loss-after '?'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("40 samples, training on what follows '?'"), std::string::npos) << r.err;
  r = run_cli("train --resume " + quoted(ckpt) + " --steps 3 -t 1 --checkpoint-dir " +
              quoted(ckpt));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("40 samples, training on what follows '?'"), std::string::npos) << r.err;
  const std::string bad = temp("answers_bad.txt");
  const std::string bad_text = text + "no question here\n";
  ASSERT_TRUE(write_file_atomic(bad, bad_text.data(), bad_text.size()));
  r = run_cli("train --shape 32,2,2,2,64 --tokenizer " + quoted(demo) + " --data " + quoted(bad) +
              " --seq 32 --steps 1 -t 1 --loss-after '?' -o " + quoted(temp("answers_bad.gguf")));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.err.find("line 41 holds no '?' (--loss-after)"), std::string::npos) << r.err;
  r = run_cli(flags + " --steps 1 --seq 32 --loss-after '?'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("holds another run's checkpoints"), std::string::npos) << r.err;
  r = run_cli(flags + "_2 --steps 1 --seq 4 --loss-after '?'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("past a window of seq_len 4"), std::string::npos) << r.err;
  std::filesystem::remove_all(ckpt);
  std::filesystem::remove_all(ckpt + "_2");
}

}  // namespace
}  // namespace nexus
