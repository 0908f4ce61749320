// End-to-end tests of `nexus convert --hf`: a checkpoint folder converts (one progress line per
// tensor, a model `nexus run` generates from, greedily, the same text as the GGUF fixture), and
// every error (missing folder, config.json or tensor, unsupported architecture, shape mismatch,
// corrupt safetensors) exits non-zero with a message naming the problem and writes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "e2e/cli_util.h"
#include "nexus/io/gguf.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::quoted;
using test::run_cli;

class ConvertHf : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("nexus_convert_hf_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string fixture(const std::string& name) {
    return test::fixtures_dir() + "/hf/" + name;
  }
  // A copy of fixture `name` as dir_/ckpt, to break.
  std::string copy_fixture(const std::string& name) {
    const fs::path to = dir_ / "ckpt";
    fs::copy(fixture(name), to, fs::copy_options::recursive);
    return to.string();
  }
  void edit_config(const std::string& ckpt, const std::function<void(json&)>& change) {
    json c = json::parse(std::ifstream(ckpt + "/config.json"));
    change(c);
    std::ofstream(ckpt + "/config.json") << c.dump(1);
  }
  // Runs a conversion expected to fail: non-zero exit, `message` in stderr, and nothing written
  // (neither the output nor a temporary file beside it).
  void expect_failure(const std::string& args, const std::string& message) {
    const std::string out = path("out.gguf");
    auto r = run_cli("convert " + args + " -o " + quoted(out));
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find("out.gguf"), std::string::npos) << e.path();
  }
  fs::path dir_;
};

TEST_F(ConvertHf, ConvertsWithProgressAndRuns) {
  const std::string out = path("qwen3.gguf");
  auto r =
      run_cli("convert --hf " + quoted(fixture("qwen3")) + " -o " + quoted(out) + " --type f32");
  ASSERT_EQ(r.code, 0) << r.output;
  // One progress line per tensor: 24 of them, numbered.
  const std::regex line(R"(\[\d+/24\] \S+ F32 \[[0-9, ]+\] -> \S+)");
  const auto n =
      std::distance(std::sregex_iterator(r.err.begin(), r.err.end(), line), std::sregex_iterator());
  EXPECT_EQ(n, 24) << r.err;
  EXPECT_NE(
      r.err.find("model.layers.1.self_attn.k_norm.weight F32 [32] -> blk.1.attn_k_norm.weight"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("qwen3, matrices F32, vocabulary gpt2 (pre qwen2)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("wrote " + out + ": 24 tensors (24 F32)"), std::string::npos) << r.out;
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->get_string("general.architecture"), "qwen3");
  EXPECT_EQ(g->get_string("general.name"), "qwen3");
  EXPECT_EQ(g->get_int("qwen3.attention.key_length"), 32);
  EXPECT_EQ(g->find_tensor("output.weight"), nullptr);  // tied

  // Greedy decoding of the converted model equals the fixture GGUF's (the same weights).
  const std::string gen = " -p 'the other' -n 12 --temp 0 --seed 1 --ignore-eos";
  auto a = run_cli("run -m " + quoted(out) + gen);
  auto b = run_cli("run -m " + quoted(test::fixtures_dir() + "/models/qwen3.gguf") + gen);
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
}

// The real checkpoint transformers wrote (tests/fixtures/hf/lm_buddy_tiny_gpt2): greedy `nexus run`
// continues " lower" with the tokens scripts/gen_hf_real_reference.py's PyTorch forward pass
// chose (ids 2 2 2 2 8 8 8 8 8 8: "w" and "d" in its 21-token vocabulary).
TEST_F(ConvertHf, RealTinyGpt2GeneratesThePyTorchGreedyText) {
  const std::string out = path("tiny.gguf");
  auto r = run_cli("convert --hf " + quoted(fixture("lm_buddy_tiny_gpt2")) + " -o " + quoted(out) +
                   " --type f32");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("h.0.attn.c_attn.weight F32 [2, 6] -> blk.0.attn_qkv.weight (transposed)"),
            std::string::npos)
      << r.err;
  r = run_cli("run -m " + quoted(out) + " -p ' lower' -n 10 --temp 0 --ignore-eos");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.out.find(" lowerwwwwdddddd"), std::string::npos) << r.out;
}

TEST_F(ConvertHf, GPT2AndShardedLlamaDefaultToF16) {
  for (const char* name : {"gpt2", "llama_untied"}) {
    SCOPED_TRACE(name);
    const std::string out = path(std::string(name) + ".gguf");
    auto r = run_cli("convert --hf " + quoted(fixture(name)) + " -o " + quoted(out));
    ASSERT_EQ(r.code, 0) << r.output;
    auto g = GgufFile::open(out);
    ASSERT_TRUE(g) << g.status().message();
    EXPECT_EQ(g->get_int("general.file_type"), 1);
    const std::string q =
        name == std::string("gpt2") ? "blk.0.attn_qkv.weight" : "blk.0.attn_q.weight";
    ASSERT_NE(g->find_tensor(q), nullptr);
    EXPECT_EQ(g->find_tensor(q)->dtype, DType::kF16);
    EXPECT_EQ(g->find_tensor("blk.0.attn_norm.weight")->dtype, DType::kF32);
  }
}

TEST_F(ConvertHf, UsageErrors) {
  auto r = run_cli("convert --hf " + quoted(fixture("qwen3")) + " -i x.gguf -o " +
                   quoted(path("o.gguf")));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.err.find("give exactly one of --hf DIR"), std::string::npos) << r.err;
  r = run_cli("convert --hf " + quoted(fixture("qwen3")) + " --tokenizer t.bin -o " +
              quoted(path("o.gguf")));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(fs::exists(path("o.gguf")));
  // The output may not replace a file of the checkpoint.
  const std::string ck = copy_fixture("qwen2");
  const auto before = fs::file_size(ck + "/model.safetensors");
  r = run_cli("convert --hf " + quoted(ck) + " -o " + quoted(ck + "/./model.safetensors"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.err.find("would replace the input"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(ck + "/model.safetensors"), before);
}

TEST_F(ConvertHf, MissingFolderOrConfig) {
  expect_failure("--hf " + quoted(path("nope")), "is not a directory");
  fs::create_directories(dir_ / "empty");
  expect_failure("--hf " + quoted(path("empty")), "no config.json in");
}

TEST_F(ConvertHf, UnsupportedArchitectureIsNamed) {
  const std::string ck = copy_fixture("llama_gqa_tied");
  edit_config(ck, [](json& c) { c["architectures"] = {"MistralForCausalLM"}; });
  expect_failure("--hf " + quoted(ck), "architecture 'MistralForCausalLM' is not supported");
}

TEST_F(ConvertHf, MissingTensor) {
  const std::string ck = copy_fixture("qwen2");
  edit_config(ck, [](json& c) { c["num_hidden_layers"] = 3; });
  expect_failure("--hf " + quoted(ck), "tensor 'model.layers.2.input_layernorm.weight'");
}

TEST_F(ConvertHf, ShapeMismatch) {
  const std::string ck = copy_fixture("gpt2");
  edit_config(ck, [](json& c) { c["n_inner"] = 128; });
  expect_failure("--hf " + quoted(ck),
                 "tensor 'transformer.h.0.mlp.c_fc.weight' has shape [64, 144] but config.json "
                 "implies [64, 128]");
}

TEST_F(ConvertHf, MissingTokenizer) {
  const std::string ck = copy_fixture("qwen3");
  fs::remove(ck + "/tokenizer.json");
  expect_failure("--hf " + quoted(ck), "no tokenizer.json in");
}

TEST_F(ConvertHf, CorruptSafetensors) {
  const std::string ck = copy_fixture("qwen3");
  fs::resize_file(ck + "/model.safetensors", fs::file_size(ck + "/model.safetensors") - 100);
  expect_failure("--hf " + quoted(ck), "lie outside");
  // A shard of a sharded checkpoint, cut inside its header.
  fs::remove_all(ck);
  const std::string ck2 = copy_fixture("llama_untied");
  fs::resize_file(ck2 + "/model-00002-of-00002.safetensors", 100);
  expect_failure("--hf " + quoted(ck2), "model-00002-of-00002.safetensors: header length");
}

}  // namespace
}  // namespace nexus
