// Writes the seed corpus for fuzz_gguf (tests/fuzz/corpus/): a few tiny, valid GGUF files that
// between them use every value type, arrays of each kind, plain and block-quantized tensors, a
// non-default alignment and the v2 header. Run: build-fuzz/make_gguf_corpus tests/fuzz/corpus
#include <cstdio>
#include <string>
#include <vector>

#include "nexus/io/gguf.h"

namespace {

using nexus::DType;
using nexus::GgufType;
using nexus::GgufValue;
using nexus::GgufWriter;

GgufValue scalar(GgufType t, int64_t i, double f = 0.0) {
  GgufValue v;
  v.type = t;
  v.i = i;
  v.u = t == GgufType::kU64 ? static_cast<uint64_t>(i) : 0;
  v.f = f;
  return v;
}

GgufValue int_array(GgufType t, std::vector<int64_t> xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = t;
  v.ai = std::move(xs);
  return v;
}

// Every scalar type, every array kind, an F32 and an F16 tensor.
std::vector<uint8_t> all_types() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set("u8", scalar(GgufType::kU8, 200));
  w.set("i8", scalar(GgufType::kI8, -100));
  w.set("u16", scalar(GgufType::kU16, 60000));
  w.set("i16", scalar(GgufType::kI16, -30000));
  w.set_u32("u32", 7);
  w.set_i32("i32", -7);
  w.set_u64("u64", 1ull << 40);
  w.set("i64", scalar(GgufType::kI64, -(1ll << 40)));
  w.set_f32("f32", 0.5f);
  w.set("f64", scalar(GgufType::kF64, 0, -2.25));
  w.set_bool("bool", true);
  w.set_string_array("strs", {"a", "", "<0x0A>"});
  w.set_f32_array("f32s", {1.0, -0.5});
  w.set_i32_array("i32s", {1, 2, 3});
  w.set("u8s", int_array(GgufType::kU8, {0, 255}));
  w.set("bools", int_array(GgufType::kBool, {0, 1}));
  std::vector<float> f(6, 1.5f);
  w.add_tensor("w", DType::kF32, {2, 3}, f.data());
  std::vector<uint16_t> h(4, nexus::f32_to_f16(-2.0f));
  w.add_tensor("h", DType::kF16, {4}, h.data());
  return w.serialize();
}

// Block-quantized tensors (Q8_0, Q4_K) and alignment 64.
std::vector<uint8_t> quantized() {
  GgufWriter w;
  w.set_alignment(64);
  std::vector<uint8_t> q8(2 * 34, 1), q4k(144, 2);
  w.add_tensor("q8", DType::kQ8_0, {2, 32}, q8.data());
  w.add_tensor("q4k", DType::kQ4_K, {1, 256}, q4k.data());
  return w.serialize();
}

// A vocabulary-only file (no tensors), like llama.cpp's ggml-vocab-*.gguf.
std::vector<uint8_t> vocab() {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81the"});
  w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  return w.serialize();
}

// A rank-4 tensor in a GGUF v2 file.
std::vector<uint8_t> v2_rank4() {
  GgufWriter w;
  std::vector<uint16_t> b(24, nexus::f32_to_bf16(3.0f));
  w.add_tensor("t4", DType::kBF16, {1, 2, 3, 4}, b.data());
  std::vector<uint8_t> img = w.serialize();
  img[4] = 2;  // the v2 header differs from v3 only in the version number
  return img;
}

bool save(const std::string& path, const std::vector<uint8_t>& img) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(img.data(), 1, img.size(), f) == img.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_gguf_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const bool ok = save(dir + "/all_types.gguf", all_types()) &&
                  save(dir + "/quantized.gguf", quantized()) &&
                  save(dir + "/vocab.gguf", vocab()) && save(dir + "/v2_rank4.gguf", v2_rank4());
  if (!ok) std::fprintf(stderr, "make_gguf_corpus: cannot write into '%s'\n", dir.c_str());
  return ok ? 0 : 1;
}
