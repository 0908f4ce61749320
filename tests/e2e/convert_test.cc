// End-to-end tests of `nexus convert`: llama2.c import, f16/bf16/f32 conversion (types and
// values checked in the written file), and one-line errors with usage (2) or failure (1) codes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "e2e/cli_util.h"
#include "nexus/io/gguf.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;
using test::quoted;
using test::run_cli;

class Convert : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("nexus_convert_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A small F32 model: a 3x5 matrix, a 1-D F32 and a 1-D F16 vector, an I32 matrix, metadata.
  std::string write_source() {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    std::vector<float> m(15), v(5);
    for (int i = 0; i < 15; ++i) m[i] = 0.37f * static_cast<float>(i) - 2.1f;
    for (int i = 0; i < 5; ++i) v[i] = 1.0f + 1e-4f * static_cast<float>(i);
    std::vector<uint16_t> h(5);
    for (int i = 0; i < 5; ++i) h[i] = f32_to_f16(0.1f * static_cast<float>(i));
    std::vector<int32_t> ids = {1, 2, 3, 4};
    w.add_tensor("m.weight", DType::kF32, {3, 5}, m.data());
    w.add_tensor("norm.weight", DType::kF32, {5}, v.data());
    w.add_tensor("half.bias", DType::kF16, {5}, h.data());
    w.add_tensor("ids", DType::kI32, {2, 2}, ids.data());
    const std::string p = path("src.gguf");
    EXPECT_TRUE(w.write(p));
    return p;
  }

  fs::path dir_;
};

// The output's tensor `name`, which must exist and have type `t`.
const GgufTensorInfo& tensor(const GgufFile& g, const std::string& name, DType t) {
  const GgufTensorInfo* ti = g.find_tensor(name);
  if (!ti) throw std::runtime_error("no tensor " + name);
  EXPECT_EQ(ti->dtype, t) << name;
  return *ti;
}

template <typename T>
T elem(const GgufTensorInfo& t, size_t i) {
  T v;
  std::memcpy(&v, t.data + i * sizeof(T), sizeof(T));
  return v;
}

TEST_F(Convert, GgufToF16Bf16AndBack) {
  const std::string src = write_source();
  auto in = GgufFile::open(src);
  ASSERT_TRUE(in) << in.status().message();
  const test::CliResult r =
      run_cli("convert -i " + quoted(src) + " -o " + quoted(path("f16.gguf")) + " --type f16");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("4 tensors (1 F16, 2 F32, 1 I32)"), std::string::npos) << r.output;
  auto f16 = GgufFile::open(path("f16.gguf"));
  ASSERT_TRUE(f16) << f16.status().message();
  EXPECT_EQ(f16->get_int("general.file_type"), 1);
  EXPECT_EQ(f16->get_string("general.architecture"), "llama");
  EXPECT_EQ(f16->get_string_array("tokenizer.ggml.tokens")->at(1), "b");
  const auto& m_in = tensor(in.value(), "m.weight", DType::kF32);
  const auto& m16 = tensor(f16.value(), "m.weight", DType::kF16);
  EXPECT_EQ(m16.shape, (std::vector<int64_t>{3, 5}));
  for (size_t i = 0; i < 15; ++i)
    EXPECT_EQ(elem<uint16_t>(m16, i), f32_to_f16(elem<float>(m_in, i)));
  const auto& norm = tensor(f16.value(), "norm.weight", DType::kF32);
  EXPECT_EQ(std::memcmp(norm.data, tensor(in.value(), "norm.weight", DType::kF32).data, 20), 0);
  const auto& half = tensor(f16.value(), "half.bias", DType::kF32);  // 1-D tensors become F32
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(elem<float>(half, i), f16_to_f32(f32_to_f16(0.1f * i)));
  EXPECT_EQ(elem<int32_t>(tensor(f16.value(), "ids", DType::kI32), 3), 4);

  // F16 -> BF16 goes through fp32; F16 -> F32 is exact.
  ASSERT_EQ(run_cli("convert -i " + quoted(path("f16.gguf")) + " -o " + quoted(path("bf16.gguf")) +
                    " --type BF16")
                .code,
            0);
  auto bf16 = GgufFile::open(path("bf16.gguf"));
  ASSERT_TRUE(bf16) << bf16.status().message();
  EXPECT_EQ(bf16->get_int("general.file_type"), 32);
  const auto& mb = tensor(bf16.value(), "m.weight", DType::kBF16);
  for (size_t i = 0; i < 15; ++i)
    EXPECT_EQ(elem<uint16_t>(mb, i), f32_to_bf16(f16_to_f32(elem<uint16_t>(m16, i))));
  ASSERT_EQ(run_cli("convert -i " + quoted(path("f16.gguf")) + " -o " + quoted(path("f32.gguf")) +
                    " --type f32")
                .code,
            0);
  auto f32 = GgufFile::open(path("f32.gguf"));
  ASSERT_TRUE(f32) << f32.status().message();
  EXPECT_EQ(f32->get_int("general.file_type"), 0);
  const auto& m32 = tensor(f32.value(), "m.weight", DType::kF32);
  for (size_t i = 0; i < 15; ++i)
    EXPECT_EQ(elem<float>(m32, i), f16_to_f32(elem<uint16_t>(m16, i)));
}

TEST_F(Convert, Llama2cImport) {
  NEXUS_REQUIRE_SHARED("models/stories260K.bin");
  NEXUS_REQUIRE_SHARED("models/tok512.bin");
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string args = "convert --llama2c " +
                           quoted(test::shared_path("models/stories260K.bin")) + " --tokenizer " +
                           quoted(test::shared_path("models/tok512.bin"));
  test::CliResult r = run_cli(args + " -o " + quoted(path("s.gguf")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("47 tensors (47 F32)"), std::string::npos) << r.output;
  auto out = GgufFile::open(path("s.gguf"));
  ASSERT_TRUE(out) << out.status().message();
  auto ref = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(ref) << ref.status().message();
  for (const auto& t : out->tensors()) {
    const GgufTensorInfo* rt = ref->find_tensor(t.name);
    ASSERT_NE(rt, nullptr) << t.name;
    ASSERT_EQ(rt->nbytes, t.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(rt->data, t.data, t.nbytes), 0) << t.name;
  }
  EXPECT_EQ(out->get_int("llama.attention.head_count_kv"), 4);
  // Nothing but the output is left in the directory (the temporary file was renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);

  // Import and convert in one step: matrices F16, norms F32.
  r = run_cli(args + " -o " + quoted(path("s16.gguf")) + " --type f16");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("47 tensors (36 F16, 11 F32)"), std::string::npos) << r.output;
  auto s16 = GgufFile::open(path("s16.gguf"));
  ASSERT_TRUE(s16) << s16.status().message();
  const auto& q = tensor(s16.value(), "blk.2.attn_q.weight", DType::kF16);
  const auto& q_ref = tensor(ref.value(), "blk.2.attn_q.weight", DType::kF32);
  for (size_t i = 0; i < 64 * 64; ++i)
    ASSERT_EQ(elem<uint16_t>(q, i), f32_to_f16(elem<float>(q_ref, i))) << i;
  tensor(s16.value(), "blk.2.attn_norm.weight", DType::kF32);
}

TEST_F(Convert, ErrorsAreOneLineWithExitCodes) {
  const std::string src = write_source();
  std::ofstream(path("short.bin"), std::ios::binary) << "0123456789";
  std::ofstream(path("trunc.gguf"), std::ios::binary) << "GGUF\x03";
  const std::string out = quoted(path("out.gguf"));
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  const Case cases[] = {
      {"", 2, "-o OUT.gguf is required"},
      {"--bogus -o " + out, 2, "The following argument was not expected: --bogus"},
      {"-o " + out, 2, "give exactly one of --hf DIR, --llama2c MODEL.bin or -i IN.gguf"},
      {"-i " + quoted(src) + " --llama2c x -o " + out, 2, "give exactly one of"},
      {"--llama2c x -o " + out, 2, "--llama2c needs --tokenizer"},
      {"-i " + quoted(src) + " --tokenizer t -o " + out + " --type f16", 2,
       "--tokenizer only applies to --llama2c"},
      {"-i " + quoted(src) + " -o " + out, 2, "-i needs --type"},
      {"-i " + quoted(src) + " -o " + out + " --type q9", 2, "unknown --type 'q9'"},
      {"-i " + quoted(src) + " -o " + out + " --type q8_k", 2, "--type q8_k is not a supported weight type"},
      {"-i /nonexistent/in.gguf -o " + out + " --type f16", 1,
       "cannot open '/nonexistent/in.gguf'"},
      {"-i " + quoted(path("trunc.gguf")) + " -o " + out + " --type f16", 1,
       "trunc.gguf: at offset 4: file truncated while reading version"},
      {"--llama2c " + quoted(path("short.bin")) + " --tokenizer x -o " + out, 1,
       "short.bin: file is 10 bytes, shorter than the 28-byte llama2.c header"},
      {"-i " + quoted(src) + " -o /nonexistent/dir/out.gguf --type f16", 1,
       "cannot write '/nonexistent/dir/out.gguf'"},
  };
  for (const Case& c : cases) {
    const test::CliResult r = run_cli("convert " + c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("nexus convert: error: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(path("out.gguf"))) << c.args;
  }
  EXPECT_EQ(run_cli("convert --help").code, 0);
}

// -o naming the input (by another spelling too) would have replaced the user's original with its
// conversion: refused, and the source is left as it was.
TEST_F(Convert, RefusesToWriteOverItsSource) {
  const std::string src = write_source();
  std::ifstream in(src, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string& o : {src, (dir_ / "." / "src.gguf").string()}) {
    const test::CliResult r =
        run_cli("convert -i " + quoted(src) + " -o " + quoted(o) + " --type f16");
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("writing it would replace the input"), std::string::npos) << r.output;
  }
  std::ifstream again(src, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()),
            before);
  EXPECT_EQ(
      run_cli("convert -i " + quoted(src) + " -o " + quoted(path("f16.gguf")) + " --type f16").code,
      0);
}

}  // namespace
}  // namespace nexus
