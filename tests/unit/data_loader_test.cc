// DataLoader: seeded determinism independent of prefetching, restore(), windows that are slices of
// the file, clean shutdown with a blocked producer, size errors; SequentialBatches' full pass.
#include "nexus/train/data_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace nexus {
namespace {

// A file whose token i is (i * 7919 + 13) % 1000, so any window identifies its offset.
TokenFile make_file(const std::string& name, uint64_t n) {
  const std::string path = ::testing::TempDir() + "loader_" + name;
  std::vector<int32_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % 1000);
  auto w = TokenFileWriter::create(path, 1000, 1, -1);
  EXPECT_TRUE(w.value()->append(ids));
  EXPECT_TRUE(w.value()->finish());
  return TokenFile::open(path).value();
}

struct Copy {
  std::vector<int32_t> inputs, targets;
  std::vector<uint64_t> offsets;
  bool operator==(const Copy&) const = default;
};

Copy copy(const Batch& b) {
  return {{b.inputs.begin(), b.inputs.end()},
          {b.targets.begin(), b.targets.end()},
          {b.offsets.begin(), b.offsets.end()}};
}

std::vector<Copy> take(DataLoader& l, int n) {
  std::vector<Copy> out;
  for (int i = 0; i < n; ++i) out.push_back(copy(l.next()));
  return out;
}

TEST(DataLoader, SameSeedSameBatchesWhateverThePrefetch) {
  const TokenFile f = make_file("det.bin", 5000);
  DataLoader a(f, 4, 16, 42, 0), b(f, 4, 16, 42, 1), c(f, 4, 16, 42, 3);
  const auto ba = take(a, 20);
  EXPECT_EQ(ba, take(b, 20));
  EXPECT_EQ(ba, take(c, 20));
  DataLoader d(f, 4, 16, 43);
  EXPECT_NE(ba, take(d, 20));
  EXPECT_GE(c.total_wait_seconds(), 0.0);
}

TEST(DataLoader, WindowsAreSlicesWithShiftedTargets) {
  const TokenFile f = make_file("slices.bin", 300);
  DataLoader l(f, 8, 32, 7);
  bool saw_last_start = false;
  for (int k = 0; k < 200; ++k) {
    const Batch& b = l.next();
    EXPECT_EQ(b.index, static_cast<uint64_t>(k));
    ASSERT_EQ(b.rows, 8);
    ASSERT_EQ(b.inputs.size(), 8u * 32u);
    for (int r = 0; r < 8; ++r) {
      const uint64_t off = b.offsets[r];
      ASSERT_LE(off + 33, f.size());
      saw_last_start |= off + 33 == f.size();
      for (int t = 0; t < 32; ++t) {
        ASSERT_EQ(b.inputs[r * 32 + t], f[off + t]);
        ASSERT_EQ(b.targets[r * 32 + t], f[off + t + 1]);
      }
    }
  }
  EXPECT_TRUE(saw_last_start);  // the last window start is reachable
}

TEST(DataLoader, RestoreContinuesWithTheSameBatches) {
  const TokenFile f = make_file("restore.bin", 4000);
  DataLoader a(f, 2, 8, 5, 2);
  take(a, 7);
  const DataLoaderState st = a.state();
  EXPECT_EQ(st.batches, 7u);
  const auto expected = take(a, 10);

  DataLoader b(f, 2, 8, 999, 3);  // another seed: restore overrides it
  take(b, 3);
  b.restore(st);
  EXPECT_EQ(take(b, 10), expected);
  EXPECT_EQ(b.state().batches, 17u);

  DataLoader other_shape(f, 3, 8, 5);
  EXPECT_THROW(other_shape.restore(st), Error);

  a.restore(st);  // rewinding the same loader works too
  EXPECT_EQ(take(a, 10), expected);
  const Batch& again = a.next();
  EXPECT_EQ(again.index, 17u);
}

TEST(DataLoader, ShutsDownWhileTheProducerIsBlocked) {
  const TokenFile f = make_file("shutdown.bin", 1000);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    DataLoader l(f, 4, 8, static_cast<uint64_t>(i), 2);
    if (i % 2) l.next();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // ring full: producer waits
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(DataLoader, RejectsWindowsLargerThanTheFile) {
  const TokenFile f = make_file("small.bin", 10);
  EXPECT_TRUE(DataLoader::check(f, 1, 9));
  const Status st = DataLoader::check(f, 1, 10);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("holds 10 tokens, fewer than one window of seq_len + 1 = 11"),
            std::string::npos)
      << st.message();
  EXPECT_THROW(DataLoader(f, 1, 10, 0), Error);
  EXPECT_THROW(DataLoader(f, 0, 4, 0), Error);
  EXPECT_THROW(SequentialBatches(f, 2, 10), Error);
  DataLoader ok(f, 3, 9, 0);  // one possible window: every row is the whole file
  const Batch& b = ok.next();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(b.offsets[r], 0u);
}

TEST(SequentialBatches, CoversTheFileInOrder) {
  const TokenFile f = make_file("val.bin", 1001);
  SequentialBatches s(f, 3, 100);
  EXPECT_EQ(s.n_windows(), 10u);
  EXPECT_EQ(s.n_batches(), 4u);
  for (int pass = 0; pass < 2; ++pass) {
    const Batch* b = nullptr;
    uint64_t expect_off = 0;
    int batches = 0;
    while (s.next(&b)) {
      ++batches;
      for (int r = 0; r < b->rows; ++r, expect_off += 100) {
        ASSERT_EQ(b->offsets[r], expect_off);
        EXPECT_EQ(b->inputs[r * 100], f[expect_off]);
        EXPECT_EQ(b->targets[r * 100 + 99], f[expect_off + 100]);
      }
    }
    EXPECT_EQ(batches, 4);
    EXPECT_EQ(b->rows, 1);  // 10 windows = 3 + 3 + 3 + 1
    EXPECT_EQ(expect_off, 1000u);
    s.reset();
  }
}

}  // namespace
}  // namespace nexus

namespace nexus {
namespace {

// Data parallel: ranks 0..world-1 with batch B each see, batch after batch, the consecutive
// shares of the single loader's batch of world * B; the state counts that global batch, so a
// stream stopped on two ranks goes on, unchanged, on one (or four) after restore().
TEST(DataLoader, RanksTakeConsecutiveSharesOfTheGlobalBatch) {
  const TokenFile f = make_file("shards.bin", 5000);
  const int seq = 16;
  DataLoader whole(f, 8, seq, 42, 0);
  DataLoader r0(f, 4, seq, 42, 2, 0, 2), r1(f, 4, seq, 42, 1, 1, 2);
  std::vector<DataLoader*> quarters;
  std::vector<std::unique_ptr<DataLoader>> own;
  for (int r = 0; r < 4; ++r) own.push_back(std::make_unique<DataLoader>(f, 2, seq, 42, 0, r, 4));
  for (int k = 0; k < 12; ++k) {
    const Copy w = copy(whole.next()), a = copy(r0.next()), b = copy(r1.next());
    ASSERT_EQ(std::vector<uint64_t>(w.offsets.begin(), w.offsets.begin() + 4), a.offsets) << k;
    ASSERT_EQ(std::vector<uint64_t>(w.offsets.begin() + 4, w.offsets.end()), b.offsets) << k;
    ASSERT_EQ(std::vector<int32_t>(w.inputs.begin(), w.inputs.begin() + 4 * seq), a.inputs);
    for (int r = 0; r < 4; ++r)
      ASSERT_EQ(std::vector<uint64_t>(w.offsets.begin() + 2 * r, w.offsets.begin() + 2 * r + 2),
                copy(own[r]->next()).offsets)
          << k << " rank " << r << " of 4";
  }
  const DataLoaderState st = r1.state();
  EXPECT_EQ(st.batch, 8);
  EXPECT_EQ(st.rng, whole.state().rng);
  DataLoader one(f, 8, seq, 1, 0);
  one.restore(st);
  EXPECT_EQ(copy(one.next()).offsets, copy(whole.next()).offsets);
  DataLoader wrong(f, 3, seq, 1, 0, 0, 2);
  EXPECT_THROW(wrong.restore(st), Error);
  EXPECT_THROW(DataLoader(f, 4, seq, 1, 0, 2, 2), Error);
}

}  // namespace
}  // namespace nexus

namespace nexus {
namespace {

// Documents: each window is one document from its first token, cut at its end with ignored
// targets after it, and with ignored targets before the document's loss_from.
TEST(DataLoader, DocumentWindowsStartAtADocumentAndMaskWhatIsNotTrained) {
  const TokenFile f = make_file("docs.bin", 100);
  Documents docs;
  docs.begin = {0, 10, 40};
  docs.end = {10, 40, 100};
  docs.loss_from = {1, 25, 41};  // the second trains on tokens 25.. only
  const int seq = 20;
  DataLoader l(f, 4, seq, 3, 0, 0, 1, &docs);
  std::array<int, 3> seen{};
  for (int k = 0; k < 30; ++k) {
    const Batch& b = l.next();
    for (int r = 0; r < b.rows; ++r) {
      const size_t d =
          std::find(docs.begin.begin(), docs.begin.end(), b.offsets[r]) - docs.begin.begin();
      ASSERT_LT(d, 3u) << "window at " << b.offsets[r] << " is not a document's start";
      ++seen[d];
      const uint64_t begin = docs.begin[d], n = std::min<uint64_t>(docs.end[d] - begin - 1, seq);
      for (int i = 0; i < seq; ++i) {
        const int32_t in = b.inputs[r * seq + i], tg = b.targets[r * seq + i];
        if (static_cast<uint64_t>(i) < n) {
          EXPECT_EQ(in, f[begin + i]);
          EXPECT_EQ(tg, begin + 1 + i < docs.loss_from[d] ? -1 : f[begin + 1 + i]) << d << " " << i;
        } else {
          EXPECT_EQ(tg, -1) << "padding after document " << d << " is trained at " << i;
          EXPECT_EQ(in, f[begin + n - 1]);
        }
      }
    }
  }
  for (int c : seen) EXPECT_GT(c, 15);  // 120 windows, about 40 each
  // The stream is a function of the seed, and state() / restore() continue it.
  DataLoader a(f, 4, seq, 3, 2, 0, 1, &docs), b(f, 4, seq, 3, 0, 0, 1, &docs);
  EXPECT_EQ(take(a, 5), take(b, 5));
  DataLoader c(f, 4, seq, 99, 0, 0, 1, &docs);
  c.restore(a.state());
  EXPECT_EQ(take(a, 3), take(c, 3));
}

TEST(DataLoader, RejectsDocumentsWhoseTrainedTokensLiePastTheWindow) {
  const TokenFile f = make_file("docs_far.bin", 100);
  Documents docs;
  docs.begin = {0, 50};
  docs.end = {50, 100};
  docs.loss_from = {1, 80};
  EXPECT_TRUE(DataLoader::check(f, 2, 30, &docs));
  const Status st = DataLoader::check(f, 2, 29, &docs);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("document 2 trains on tokens from its token 30 on, past a window of "
                              "seq_len 29"),
            std::string::npos)
      << st.message();
  const Documents none;
  EXPECT_FALSE(DataLoader::check(f, 2, 30, &none));
}

}  // namespace
}  // namespace nexus
