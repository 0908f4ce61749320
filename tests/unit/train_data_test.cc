// open_training_data's documents: one sample a line, each with BOS, trained from after its last
// --loss-after text; a token file split at BOS; errors that name the line.
#include "nexus/train/train_data.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_paths.h"

namespace nexus::train {
namespace {

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<int32_t> tokens(const TokenFile& f, uint64_t begin, uint64_t end) {
  std::vector<int32_t> out(end - begin);
  f.copy(begin, out);
  return out;
}

TEST(TrainData, LinesAreSamplesTrainedAfterTheirLastLossText) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  auto tok = Tokenizer::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(tok);
  const Tokenizer& t = **tok;
  const std::string a = "Tom has a red ball. What does Tom have? Tom has a red ball.";
  const std::string b = "Lily saw a cat. Who did Lily see? Lily saw a cat.";
  const std::string path = write_text("docs.txt", a + "\n\n  \n" + b + "\n");
  auto data = open_training_data(path, t, {false, "?"});
  ASSERT_TRUE(data) << data.status().message();
  ASSERT_TRUE(data.value().documents);
  const Documents& d = *data.value().documents;
  const TokenFile& f = data.value().file;
  ASSERT_EQ(d.size(), 2u);  // the blank lines are no samples
  EXPECT_EQ(tokens(f, d.begin[0], d.end[0]), t.encode(a, true));
  EXPECT_EQ(tokens(f, d.begin[1], d.end[1]), t.encode(b, true));
  EXPECT_EQ(d.end[0], d.begin[1]);
  // What precedes loss_from is the encoding of the line up to its last '?'.
  for (size_t i = 0; i < 2; ++i) {
    const std::string& line = i ? b : a;
    const std::vector<int32_t> head = t.encode(line.substr(0, line.rfind('?') + 1), true);
    ASSERT_EQ(d.loss_from[i] - d.begin[i], head.size());
    EXPECT_EQ(tokens(f, d.begin[i], d.loss_from[i]), head);
    // (decode drops the space SentencePiece's first piece starts with.)
    EXPECT_EQ(t.decode(tokens(f, d.loss_from[i], d.end[i])), line.substr(line.rfind('?') + 2));
  }
  // Without --loss-after every token after BOS is trained.
  auto plain = open_training_data(path, t, {true, ""});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain.value().documents->loss_from[1], plain.value().documents->begin[1] + 1);
  EXPECT_FALSE(open_training_data(path, t).value().documents);
}

TEST(TrainData, LossTextMissingOrLastIsAnErrorNamingTheLine) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  auto tok = Tokenizer::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(tok);
  auto missing =
      open_training_data(write_text("miss.txt", "a b? c\nno mark here\n"), **tok, {true, "?"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("line 2 holds no '?' (--loss-after)"),
            std::string::npos)
      << missing.status().message();
  auto last = open_training_data(write_text("last.txt", "a b? c\nwhat?\n"), **tok, {true, "?"});
  ASSERT_FALSE(last);
  EXPECT_NE(last.status().message().find("line 2 has nothing after its last '?'"),
            std::string::npos)
      << last.status().message();
}

TEST(TrainData, TokenFilesSplitAtBos) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  auto tok = Tokenizer::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(tok);
  const int32_t bos = (*tok)->bos_id();
  ASSERT_GE(bos, 0);
  const std::string path = ::testing::TempDir() + "docs.bin";
  auto w = TokenFileWriter::create(path, static_cast<uint64_t>((*tok)->n_vocab()),
                                   tokenizer_fingerprint(**tok), (*tok)->eos_id());
  ASSERT_TRUE(w);
  // BOS 5 6 | BOS 7 | BOS 8 9 10: three samples, the middle one 2 tokens long.
  ASSERT_TRUE(w.value()->append(std::vector<int32_t>{bos, 5, 6, bos, 7, bos, 8, 9, 10}));
  ASSERT_TRUE(w.value()->finish());
  auto data = open_training_data(path, **tok, {true, ""});
  ASSERT_TRUE(data) << data.status().message();
  const Documents& d = *data.value().documents;
  EXPECT_EQ(d.begin, (std::vector<uint64_t>{0, 3, 5}));
  EXPECT_EQ(d.end, (std::vector<uint64_t>{3, 5, 9}));
  EXPECT_EQ(d.loss_from, (std::vector<uint64_t>{1, 4, 6}));
  auto refused = open_training_data(path, **tok, {true, "?"});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("--loss-after needs text --data"), std::string::npos);
}

}  // namespace
}  // namespace nexus::train
