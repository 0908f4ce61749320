// The vector search op: every variant against a float64 brute force for f32, f16 and int8 rows
// (odd widths, fewer rows than k, several row chunks, ties broken by the smaller row), the same
// answer on any thread count; and the vector index's build, file round trip and bad files.
#include "backends/cpu/similarity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "nexus/dtype.h"
#include "nexus/runtime/vector_index.h"
#include "ops/similarity.h"
#include "test_random.h"

namespace nexus {
namespace {

struct Rows {
  DType type;
  std::vector<uint8_t> bytes;
  std::vector<float> scales, values;  // values: what each stored entry means, as float
};

// `v` stored as `type` (int8 with a per-row scale), with the float each entry stands for.
Rows store(const std::vector<float>& v, int64_t n, int64_t dim, DType type) {
  Rows r{type, {}, {}, {}};
  r.values.resize(v.size());
  if (type == DType::kF32) {
    r.bytes.resize(v.size() * 4);
    std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
    r.values = v;
  } else if (type == DType::kF16) {
    r.bytes.resize(v.size() * 2);
    auto* h = reinterpret_cast<uint16_t*>(r.bytes.data());
    for (size_t i = 0; i < v.size(); ++i) {
      h[i] = f32_to_f16(v[i]);
      r.values[i] = f16_to_f32(h[i]);
    }
  } else {
    r.bytes.resize(v.size());
    r.scales.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float amax = 0;
      for (int64_t c = 0; c < dim; ++c) amax = std::max(amax, std::abs(v[i * dim + c]));
      r.scales[i] = amax > 0 ? amax / 127 : 1;
      for (int64_t c = 0; c < dim; ++c) {
        const auto q = static_cast<int8_t>(std::lround(v[i * dim + c] / r.scales[i]));
        reinterpret_cast<int8_t*>(r.bytes.data())[i * dim + c] = q;
        r.values[i * dim + c] = q * r.scales[i];
      }
    }
  }
  return r;
}

struct Case {
  int64_t nq, n, dim, k;
};

TEST(TopKSearch, EveryVariantMatchesTheBruteForce) {
  ThreadPool pool(3);
  for (DType type : {DType::kF32, DType::kF16, DType::kI8})
    for (const Case& cs : {Case{1, 1, 1, 1}, Case{3, 5, 7, 10}, Case{5, 1000, 33, 7},
                           Case{9, 9000, 64, 5}, Case{4, 300, 384, 20}, Case{2, 0, 8, 3}}) {
      const std::vector<float> q = test::randn(cs.nq * cs.dim, 1),
                               v = test::randn(cs.n * cs.dim, 2);
      const Rows rows = store(v, cs.n, cs.dim, type);
      // The brute force on what the rows hold, in float64.
      std::vector<std::vector<std::pair<double, int64_t>>> want(cs.nq);
      for (int64_t a = 0; a < cs.nq; ++a) {
        for (int64_t i = 0; i < cs.n; ++i) {
          double s = 0;
          for (int64_t c = 0; c < cs.dim; ++c)
            s += static_cast<double>(q[a * cs.dim + c]) * rows.values[i * cs.dim + c];
          want[a].push_back({s, i});
        }
        std::sort(want[a].begin(), want[a].end(), [](auto& x, auto& y) {
          return x.first > y.first || (x.first == y.first && x.second < y.second);
        });
      }
      for (const KernelVariant<TopKArgs>& var : cpu::topk_kernels()) {
        if (!var.available()) continue;
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> scores(cs.nq * cs.k);
          std::vector<int64_t> ids(cs.nq * cs.k);
          TopKArgs a{q.data(),           cs.nq, cs.dim, rows.bytes.data(), type,
                     rows.scales.data(), cs.n,  cs.k,   scores.data(),     ids.data()};
          var.run(a, p);
          const std::string what = std::string(var.name) + " " + std::string(dtype_name(type)) +
                                   " n " + std::to_string(cs.n) + " dim " + std::to_string(cs.dim);
          for (int64_t a2 = 0; a2 < cs.nq; ++a2)
            for (int64_t j = 0; j < cs.k; ++j) {
              if (j >= cs.n) {
                EXPECT_EQ(ids[a2 * cs.k + j], -1) << what;
                continue;
              }
              const double tol = 1e-4 * std::sqrt(static_cast<double>(cs.dim));
              EXPECT_NEAR(scores[a2 * cs.k + j], want[a2][j].first, tol) << what;
              // A different row only where the two scores are within rounding.
              if (ids[a2 * cs.k + j] != want[a2][j].second) {
                const int64_t got = ids[a2 * cs.k + j];
                auto it = std::find_if(want[a2].begin(), want[a2].end(),
                                       [&](auto& w) { return w.second == got; });
                ASSERT_NE(it, want[a2].end()) << what;
                EXPECT_NEAR(it->first, want[a2][j].first, tol) << what << " row " << got;
              }
            }
        }
      }
    }
}

TEST(TopKSearch, TiesGoToTheSmallerRowOnAnyThreadCount) {
  const int64_t dim = 16, n = 20000;
  std::vector<float> v(n * dim, 0.0f), q(dim, 0.0f);
  q[3] = 1.0f;
  for (int64_t i = 0; i < n; ++i) v[i * dim + 3] = (i % 5000 == 17) ? 2.0f : 1.0f;  // 4 best
  ThreadPool pool(4);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> scores(6);
    std::vector<int64_t> ids(6);
    topk_search({q.data(), 1, dim, v.data(), DType::kF32, nullptr, n, 6, scores.data(), ids.data()},
                p);
    EXPECT_EQ(ids, (std::vector<int64_t>{17, 5017, 10017, 15017, 0, 1}));
    EXPECT_EQ(scores[0], 2.0f);
    EXPECT_EQ(scores[5], 1.0f);
  }
}

TEST(VectorIndex, SavesLoadsAndFindsEachDocumentByItself) {
  const int64_t n = 500, dim = 48;
  const std::vector<float> v = test::randn(n * dim, 9);
  std::vector<std::string> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back("doc-" + std::to_string(i));
  const std::string path = ::testing::TempDir() + "/ix_" + std::to_string(::getpid()) + ".nxvi";
  for (DType type : {DType::kF32, DType::kF16, DType::kI8}) {
    auto built = VectorIndex::build(ids, v, dim, type, "m.gguf:48");
    ASSERT_TRUE(built) << built.status().message();
    ASSERT_TRUE(built->save(path));
    auto ix = VectorIndex::load(path);
    ASSERT_TRUE(ix) << ix.status().message();
    EXPECT_EQ(ix->size(), n);
    EXPECT_EQ(ix->dim(), dim);
    EXPECT_EQ(ix->type(), type);
    EXPECT_EQ(ix->model(), "m.gguf:48");
    // Every vector (unnormalised: the search normalises) finds itself first with cosine ~1.
    const auto hits = ix->search(v, n, 3);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[i].size(), 3u);
      EXPECT_EQ(hits[i][0].id, ids[i]) << dtype_name(type);
      EXPECT_NEAR(hits[i][0].score, 1.0, type == DType::kI8 ? 2e-2 : 2e-3);
      EXPECT_GE(hits[i][0].score, hits[i][1].score);
    }
  }
  // Bad files name the fault.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto write = [&](const std::string& b) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
  };
  write(bytes.substr(0, bytes.size() - 7));
  auto cut = VectorIndex::load(path);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.status().message().find("the rows take"), std::string::npos)
      << cut.status().message();
  write("GGUF" + bytes.substr(4));
  auto magic = VectorIndex::load(path);
  ASSERT_FALSE(magic);
  EXPECT_NE(magic.status().message().find("no NXVI magic"), std::string::npos);
  write(bytes.substr(0, 10));
  EXPECT_FALSE(VectorIndex::load(path));
  std::filesystem::remove(path);
  EXPECT_FALSE(VectorIndex::build({"a"}, std::vector<float>(3), 2, DType::kF32, ""));
  EXPECT_FALSE(parse_vector_type("q4_0"));
}

}  // namespace
}  // namespace nexus
