// Load-time repacking (models/weight_repack.h): which tensors a Q4_0 model gets repacked, that
// the logits do not change (decode, batched and prefill), and that the mapped source pages are
// handed back without losing the file's bytes.
#include "models/weight_repack.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/repack.h"
#include "nexus/io/gguf.h"
#include "nexus/io/mapped_file.h"
#include "harness/random_model.h"
#include "nexus/context.h"
#include "nexus/model.h"

namespace nexus {
namespace {

// A tiny all-Q4_0 llama (tied, so the token table is Q4_0 and doubles as the head; vocab 300 =
// 37 groups of 8 and a tail of 4).
std::string q4_model_path() {
  static const std::string path = [] {
    GenModelOptions o;
    o.shape = parse_model_shape("custom:dim=64,layers=2,heads=4,ffn=96,vocab=300").value();
    o.type = ModelFileType::kQ4_0;
    o.pure = true;
    const std::string p =
        ::testing::TempDir() + "nexus_repack_q4_0_" + std::to_string(getpid()) + ".gguf";
    EXPECT_TRUE(write_random_model(o, p).is_ok());
    return p;
  }();
  return path;
}

// A random model of `shape` and `type` written to a temporary file named after `tag`.
std::string write_model(const char* shape, ModelFileType type, const char* tag) {
  GenModelOptions o;
  o.shape = parse_model_shape(shape).value();
  o.type = type;
  const std::string p =
      ::testing::TempDir() + "nexus_repack_" + tag + "_" + std::to_string(getpid()) + ".gguf";
  EXPECT_TRUE(write_random_model(o, p).is_ok());
  return p;
}

// The model at `path`, repacked at load or (NEXUS_REPACK=0) in the file's layout.
std::unique_ptr<Model> load_path(const std::string& path, bool repack) {
  if (!repack) setenv("NEXUS_REPACK", "0", 1);
  auto m = Model::load(path);
  unsetenv("NEXUS_REPACK");
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::move(m).value() : nullptr;
}

std::unique_ptr<Model> load(bool repack) { return load_path(q4_model_path(), repack); }

// Every value of `b` within tol * max|a| of `a`'s.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float scale = 0.0f;
  for (float v : a) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol * scale) << what << " " << i;
}

// Logits for a prompt of n tokens (all rows), fed in batches of `piece` tokens, then one more
// decoded token.
std::vector<float> run(const Model& m, int n, int threads, int piece = 0) {
  ContextOptions o;
  o.n_ctx = 64;
  o.n_threads = threads;
  auto ctx = Context::create(m, o);
  EXPECT_TRUE(ctx) << ctx.status().message();
  if (piece <= 0) piece = n;
  Batch b;
  std::vector<float> logits, all;
  for (int i0 = 0; i0 < n; i0 += piece) {
    b.clear();
    for (int i = i0; i < std::min(n, i0 + piece); ++i) b.add((i * 37 + 11) % 300, i, 0, true);
    EXPECT_TRUE(ctx.value()->decode(b, &logits).is_ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  b.clear();
  b.add(7, n, 0, true);
  EXPECT_TRUE(ctx.value()->decode(b, &logits).is_ok());
  all.insert(all.end(), logits.begin(), logits.end());
  return all;
}

TEST(WeightRepack, Q4_0MatricesAndTheTiedTableAreRepacked) {
  auto plain = load(false);
  auto packed = load(true);
  ASSERT_TRUE(plain && packed);
  const ModelWeights& a = plain->weights();
  const ModelWeights& b = packed->weights();
  EXPECT_EQ(a.layers[0].wq.dtype(), DType::kQ4_0);
  EXPECT_EQ(a.tok_embd.dtype(), DType::kQ4_0);
  for (const LayerWeights& l : b.layers)
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      EXPECT_EQ(t->dtype(), DType::kQ4_0x8);
  EXPECT_EQ(b.tok_embd.dtype(), DType::kQ4_0x8);
  EXPECT_EQ(b.output.data(), b.tok_embd.data());  // tied: one copy
  EXPECT_EQ(b.out_norm.dtype(), DType::kF32);
  EXPECT_EQ(b.tok_embd.shape(), a.tok_embd.shape());
}

// Bit-identical logits below kBlasMinTokens: the repacked kernels repeat vec_dot's operations (1
// and 2 threads; 3 tokens go through the token-batched kernels). A prompt of 20 tokens runs the
// same integer kernels when repacked (8-bit activations), where the plain layout takes sgemm on
// f32 ones: equal to the plain model fed 10 tokens at a time, within f32 rounding (attention
// takes another path), and as close to the plain prefill as 8-bit activations allow.
TEST(WeightRepack, LogitsAreUnchanged) {
  auto plain = load(false);
  auto packed = load(true);
  ASSERT_TRUE(plain && packed);
  for (int threads : {1, 2}) {
    for (int n : {1, 3})
      EXPECT_EQ(run(*plain, n, threads), run(*packed, n, threads))
          << n << " tokens, " << threads << " threads";
    const auto prefill = run(*packed, 20, threads);
    expect_close(run(*plain, 20, threads, 10), prefill, 1e-5f, "20 tokens vs 10 + 10 plain");
    expect_close(run(*plain, 20, threads), prefill, 3e-2f, "20 tokens vs plain sgemm");
  }
}

// A Q4_K_M llama whose matrices fit the 256-element super-blocks: every Q4_K (Q6_K) matrix
// becomes Q4_Kx8 (Q6_Kx8), and the logits stay within f32 rounding of the plain layout's (the
// repacked kernels sum each super-block exactly and round once per super-block, vec_dot per
// lane), prefill included.
TEST(WeightRepack, KQuantMatricesAreRepackedAndLogitsStayClose) {
  const std::string p = write_model("custom:dim=256,layers=2,heads=4,ffn=512,vocab=300",
                                    ModelFileType::kQ4_K_M, "q4_k");
  auto plain = load_path(p, false), packed = load_path(p, true);
  ASSERT_TRUE(plain && packed);
  int q4k = 0, q6k = 0;
  const ModelWeights& a = plain->weights();
  const ModelWeights& b = packed->weights();
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights& la = a.layers[i];
    const LayerWeights& lb = b.layers[i];
    const Tensor* ta[] = {&la.wq, &la.wk, &la.wv, &la.wo, &la.w_gate, &la.w_up, &la.w_down};
    const Tensor* tb[] = {&lb.wq, &lb.wk, &lb.wv, &lb.wo, &lb.w_gate, &lb.w_up, &lb.w_down};
    for (int j = 0; j < 7; ++j) {
      if (ta[j]->dtype() == DType::kQ4_K) {
        EXPECT_EQ(tb[j]->dtype(), DType::kQ4_Kx8) << "layer " << i << " tensor " << j;
        ++q4k;
      } else if (ta[j]->dtype() == DType::kQ6_K) {
        EXPECT_EQ(tb[j]->dtype(), DType::kQ6_Kx8) << "layer " << i << " tensor " << j;
        ++q6k;
      } else {
        EXPECT_EQ(tb[j]->dtype(), ta[j]->dtype()) << "layer " << i << " tensor " << j;
      }
    }
  }
  EXPECT_GE(q4k, 8);
  EXPECT_GE(q6k, 2);
  EXPECT_EQ(b.output.dtype(), DType::kQ6_Kx8);  // the tied Q6_K table, repacked once
  EXPECT_EQ(b.output.data(), b.tok_embd.data());
  for (int n : {1, 3})
    expect_close(run(*plain, n, 2), run(*packed, n, 2), 1e-4f, std::to_string(n) + " tokens");
  // Prefill on the repacked integer kernels: as the plain model fed 10 tokens at a time.
  expect_close(run(*plain, 20, 2, 10), run(*packed, 20, 2), 1e-4f, "20 tokens");
  std::remove(p.c_str());
}

// A head of another type (here Q8_0: the tiny rows do not fit Q6_K) is repacked to its own
// layout (Q8_0x8): the Q4_0 layers stay bit-identical, the head within f32 rounding (its kernel
// rounds once per block for eight rows, vec_dot_q8_0 per lane).
TEST(WeightRepack, OtherHeadTypesAreRepackedToo) {
  const std::string p = write_model("custom:dim=64,layers=1,heads=4,ffn=96,vocab=300,tied=0",
                                    ModelFileType::kQ4_0, "head");
  auto plain = load_path(p, false), packed = load_path(p, true);
  ASSERT_TRUE(plain && packed);
  ASSERT_EQ(plain->weights().output.dtype(), DType::kQ8_0);
  EXPECT_EQ(packed->weights().output.dtype(), DType::kQ8_0x8);
  EXPECT_EQ(packed->weights().layers[0].wq.dtype(), DType::kQ4_0x8);
  expect_close(run(*plain, 3, 2), run(*packed, 3, 2), 1e-5f, "logit");
  std::remove(p.c_str());
}

// A model without repackable matrices (F16), loaded from its file: every matrix is copied
// unchanged into the huge-page allocation (same bytes, same logits), the untied token table stays
// a view of the file, and NEXUS_REPACK=0 leaves everything mapped.
TEST(WeightRepack, FileMatricesAreCopiedAndTheTokenTableStaysMapped) {
  const std::string p = write_model("custom:dim=64,layers=1,heads=4,ffn=96,vocab=300,tied=0",
                                    ModelFileType::kF16, "f16");
  auto m = load_path(p, true), plain = load_path(p, false);
  ASSERT_TRUE(m && plain);
  const GgufFile& g = m->gguf();
  const ModelWeights& w = m->weights();
  auto bytes = read_file(p);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(w.tok_embd.data(), g.find_tensor("token_embd.weight")->data);
  for (const auto& [t, name] : {std::pair{&w.output, "output.weight"},
                                {&w.layers[0].wq, "blk.0.attn_q.weight"},
                                {&w.layers[0].w_down, "blk.0.ffn_down.weight"}}) {
    const GgufTensorInfo* ti = g.find_tensor(name);
    EXPECT_NE(t->data(), ti->data) << name;
    EXPECT_EQ(t->dtype(), DType::kF16) << name;
    EXPECT_EQ(std::memcmp(t->data(), bytes->data() + g.data_offset() + ti->offset, ti->nbytes), 0)
        << name;
  }
  // The norms' vectors are copies too (read every token, they would keep pages of the file
  // mapped).
  for (const auto& [t, name] : {std::pair{&w.layers[0].attn_norm, "blk.0.attn_norm.weight"},
                                {&w.layers[0].ffn_norm, "blk.0.ffn_norm.weight"},
                                {&w.out_norm, "output_norm.weight"}}) {
    const GgufTensorInfo* ti = g.find_tensor(name);
    EXPECT_NE(t->data(), ti->data) << name;
    EXPECT_EQ(std::memcmp(t->data(), bytes->data() + g.data_offset() + ti->offset, ti->nbytes), 0)
        << name;
  }
  EXPECT_EQ(plain->weights().output.data(), plain->gguf().find_tensor("output.weight")->data);
  EXPECT_EQ(run(*plain, 3, 2), run(*m, 3, 2));
  std::remove(p.c_str());
}

// Pages of [p, p + n) that this process has mapped (/proc/self/pagemap's present bit); -1 if the
// file cannot be read.
int64_t mapped_pages(const void* p, size_t n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::FILE* f = std::fopen("/proc/self/pagemap", "rb");
  if (f == nullptr) return -1;
  int64_t present = 0;
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + n - 1) / page;
  for (uintptr_t i = first; i <= last; ++i) {
    uint64_t entry = 0;
    if (std::fseek(f, static_cast<long>(i * sizeof(entry)), SEEK_SET) != 0 ||
        std::fread(&entry, sizeof(entry), 1, f) != 1) {
      std::fclose(f);
      return -1;
    }
    present += static_cast<int64_t>(entry >> 63);
  }
  std::fclose(f);
  return present;
}

// After the load and a few tokens, no page of the file mapping that held a copied tensor is mapped,
// the pages under the tensors' ends (which the check of each chunk against the mapping touches) and
// the small vectors included: where the page cache holds the file in huge pages, each such page
// kept a whole 2 MiB of it resident (Q06B Q8_0: 80-88 MiB).
TEST(WeightRepack, NoPageOfACopiedTensorStaysMapped) {
  // Tied, so that decoding reads nothing through the mapping (an untied token table is read
  // there, and a fault maps the cached pages around it, of other tensors too).
  const std::string p =
      write_model("custom:dim=64,layers=2,heads=4,ffn=96,vocab=300", ModelFileType::kQ8_0, "pages");
  auto m = load_path(p, true);
  ASSERT_TRUE(m);
  run(*m, 3, 2);
  const GgufFile& g = m->gguf();
  ASSERT_EQ(g.find_tensor("output.weight"), nullptr);
  int checked = 0;
  for (const GgufTensorInfo& ti : g.tensors()) {
    const int64_t pages = mapped_pages(ti.data, ti.nbytes);
    if (pages < 0) GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
    EXPECT_EQ(pages, 0) << ti.name;
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 2 * 9);  // the token table (the head), the output norm, the layers
  std::remove(p.c_str());
}

// Released source pages of a file mapping read back as the file's bytes.
TEST(WeightRepack, ReleasedPagesStillReadTheFile) {
  auto f = GgufFile::open(q4_model_path());
  ASSERT_TRUE(f) << f.status().message();
  const GgufTensorInfo* ti = f->find_tensor("token_embd.weight");
  ASSERT_NE(ti, nullptr);
  ModelWeights w;
  w.tok_embd = f->tensor(*ti);
  w.output = w.tok_embd;
  const GgufTensorInfo& first = f->tensors().front();
  const MappedSource source{q4_model_path(), first.data - f->data_offset() - first.offset};
  const RepackStats st = repack_weights(w, &source);
  EXPECT_EQ(st.tensors, 1);
  EXPECT_EQ(st.bytes, ti->nbytes);
  EXPECT_GT(st.released, 0u);
  EXPECT_EQ(w.tok_embd.dtype(), DType::kQ4_0x8);
  auto bytes = read_file(q4_model_path());
  ASSERT_TRUE(bytes);
  const size_t off = f->data_offset() + ti->offset;
  EXPECT_EQ(std::memcmp(ti->data, bytes->data() + off, ti->nbytes), 0);
  // The repacked copy read with pread equals one read through the mapping (a source file that
  // cannot be opened falls back to it) and one made from the file's bytes in memory.
  ModelWeights v;
  v.tok_embd = f->tensor(*ti);
  v.output = v.tok_embd;
  const MappedSource missing{"/nonexistent/nexus.gguf", source.base};
  repack_weights(v, &missing);
  std::vector<uint8_t> want(ti->nbytes);
  cpu::repack_q4_0x8(bytes->data() + off, want.data(), ti->shape[0], ti->shape[1]);
  EXPECT_EQ(std::memcmp(w.tok_embd.data(), want.data(), want.size()), 0);
  EXPECT_EQ(std::memcmp(v.tok_embd.data(), want.data(), want.size()), 0);
}

// A file replaced on disk after it was mapped: the copy still holds the mapped (old) bytes.
TEST(WeightRepack, AFileReplacedAfterMappingIsNotRead) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "nexus_repack_swap_" + std::to_string(getpid()) + ".gguf";
  const std::string other = path + ".other";
  GenModelOptions o;
  o.shape = parse_model_shape("custom:dim=64,layers=1,heads=4,ffn=96,vocab=300,tied=0").value();
  o.type = ModelFileType::kF16;
  ASSERT_TRUE(write_random_model(o, path).is_ok());
  o.seed = 99;
  ASSERT_TRUE(write_random_model(o, other).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f) << f.status().message();
  auto old_bytes = read_file(path);
  ASSERT_TRUE(old_bytes);
  ASSERT_EQ(std::rename(other.c_str(), path.c_str()), 0);  // the mapping keeps the old inode
  const GgufTensorInfo* ti = f->find_tensor("output.weight");
  ASSERT_NE(ti, nullptr);
  ModelWeights w;
  w.output = f->tensor(*ti);
  const GgufTensorInfo& first = f->tensors().front();
  const MappedSource source{path, first.data - f->data_offset() - first.offset};
  repack_weights(w, &source);
  EXPECT_NE(w.output.data(), ti->data);
  EXPECT_EQ(
      std::memcmp(w.output.data(), old_bytes->data() + f->data_offset() + ti->offset, ti->nbytes),
      0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nexus
