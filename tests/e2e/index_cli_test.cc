// `nexus index build|search` as processes: documents from JSONL into an index of each row type,
// each document found by its own text, and errors naming the line, the type or the model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e/cli_util.h"
#include "test_paths.h"

namespace nexus::test {
namespace {

namespace fs = std::filesystem;

TEST(IndexCli, BuildsSearchesAndNamesBadInput) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("nexus_index_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
  const std::vector<std::string> texts = {"ROMEO: But soft, what light through yonder window?",
                                          "JULIET: O Romeo, Romeo, wherefore art thou Romeo?",
                                          "MERCUTIO: A plague on both your houses!",
                                          "FRIAR: These violent delights have violent ends."};
  {
    std::ofstream f(dir / "docs.jsonl");
    for (size_t i = 0; i < texts.size(); ++i)
      f << "{\"id\": \"line" << i << "\", \"text\": \"" << texts[i] << "\"}\n\n";
  }
  const std::string docs = quoted((dir / "docs.jsonl").string());
  for (const char* type : {"f32", "f16", "int8"}) {
    const std::string ix = quoted((dir / (std::string(type) + ".nxvi")).string());
    auto b = run_cli("index build -m " + quoted(model) + " -i " + docs + " -o " + ix + " --type " +
                     type + " -t 1");
    ASSERT_EQ(b.code, 0) << b.output;
    EXPECT_NE(b.out.find("index: 4 documents of dim"), std::string::npos) << b.out;
    auto s = run_cli("index search -m " + quoted(model) + " --index " + ix + " -k 2 -t 1 -q " +
                     quoted(texts[1]) + " -q " + quoted(texts[3]));
    ASSERT_EQ(s.code, 0) << s.output;
    const size_t q1 = s.out.find("query 1:"), q2 = s.out.find("query 2:");
    ASSERT_NE(q2, std::string::npos) << s.out;
    EXPECT_NE(s.out.find("\tline1\n", q1), std::string::npos) << s.out;
    EXPECT_LT(s.out.find("\tline1\n", q1), q2) << s.out;
    EXPECT_NE(s.out.find("\tline3\n", q2), std::string::npos) << s.out;
  }
  std::ofstream(dir / "bad.jsonl") << "{\"id\": 1, \"text\": \"ok\"}\n{\"id\": 2}\n";
  auto bad =
      run_cli("index build -m " + quoted(model) + " -i " + quoted((dir / "bad.jsonl").string()) +
              " -o " + quoted((dir / "x.nxvi").string()));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("bad.jsonl:2: expected an object with a \"text\" string"),
            std::string::npos)
      << bad.err;
  auto type = run_cli("index build -m " + quoted(model) + " -i " + docs + " -o " +
                      quoted((dir / "x.nxvi").string()) + " --type q4_0");
  EXPECT_EQ(type.code, 2);
  EXPECT_NE(type.err.find("'q4_0' is not f32, f16 or int8"), std::string::npos) << type.err;
  fs::copy_file(model, dir / "other.gguf");
  auto other = run_cli("index search -m " + quoted((dir / "other.gguf").string()) + " --index " +
                       quoted((dir / "f32.nxvi").string()) + " -q hello");
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.err.find("was built with shakespeare-1m.gguf"), std::string::npos) << other.err;
  auto notix = run_cli("index search -m " + quoted(model) + " --index " + docs + " -q hi");
  EXPECT_EQ(notix.code, 1);
  EXPECT_NE(notix.err.find("not a vector index (no NXVI magic)"), std::string::npos) << notix.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nexus::test
