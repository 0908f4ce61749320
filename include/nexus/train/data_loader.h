// Batches for language-model training from a token file: random windows drawn by a seeded
// xoshiro256** (prefetched on a background thread into a preallocated ring), and a sequential
// pass for validation.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "nexus/status.h"
#include "nexus/core/rng.h"
#include "nexus/train/token_file.h"

namespace nexus {

// One batch: `rows` windows of seq_len + 1 consecutive tokens from the file, split into inputs
// (the first seq_len) and targets (the last seq_len), both row-major [rows, seq_len].
struct Batch {
  int rows = 0;  // windows in this batch (the last validation batch may hold fewer)
  int seq_len = 0;
  uint64_t index = 0;                 // 0-based batch number in the stream
  std::span<const int32_t> inputs;    // rows * seq_len ids
  std::span<const int32_t> targets;   // rows * seq_len ids: inputs shifted left by one token
  std::span<const uint64_t> offsets;  // rows: token offset of each window in the file
};

// Samples inside a token file, for training on documents rather than on a stream: a window then
// starts at a document's first token and stops at its end (the rest of the row padded, with
// ignored targets), and targets before loss_from are ignored too (training on answers only).
// Offsets are token indices in the file, per document; end - begin >= 2.
struct Documents {
  std::vector<uint64_t> begin, end, loss_from;
  size_t size() const { return begin.size(); }
};

// Where a random stream stands: restoring it replays exactly the batches that would follow.
struct DataLoaderState {
  std::array<uint64_t, 4> rng{};  // xoshiro256** state after the last consumed batch
  uint64_t batches = 0;           // batches consumed so far
  int batch = 0, seq_len = 0;  // the global batch (every rank's) and seq_len, checked by restore()
};

// The random-window stream. Batch k depends only on the seed and k, never on timing: a single
// RNG draws `batch` window starts per batch, in batch order, uniformly in [0, n - seq_len - 1]
// (with `documents`: one document per window, uniformly).
class DataLoader {
 public:
  // Throws nexus::Error when batch < 1, seq_len < 1, prefetch < 0, or seq_len + 1 tokens do not
  // fit in the file (check() first to get a Status instead). prefetch = 0 fills each batch in
  // next() on the calling thread; otherwise a thread keeps up to `prefetch` batches ready.
  // Data parallel: `rank` of `world` ranks each make a loader with the same seed and their own
  // `batch`; batch k of the stream is then the global batch of world * batch windows the single
  // loader (world 1) of that size would draw, rank r taking windows [r * batch, (r + 1) * batch).
  // The state counts the global batch, so a run resumes on any number of ranks that divides it.
  // `documents` (may be null) must outlive the loader.
  DataLoader(const TokenFile& file, int batch, int seq_len, uint64_t seed, int prefetch = 2,
             int rank = 0, int world = 1, const Documents* documents = nullptr);
  ~DataLoader();  // stops and joins the prefetch thread
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The constructor's argument checks, as a Status naming the file and the sizes.
  // With documents: at least one, and none whose first counted target lies past the window.
  static Status check(const TokenFile& file, int batch, int seq_len,
                      const Documents* documents = nullptr);

  // The next batch, waiting for the prefetch thread if it is not ready yet. The view stays valid
  // until the following next() or restore(); its buffers are reused (no allocation per batch).
  const Batch& next();
  // Seconds the last next() waited, and the total over all calls ("data wait" in logs).
  double last_wait_seconds() const { return last_wait_; }
  double total_wait_seconds() const { return total_wait_; }

  // The state after the batches consumed so far; restore() (on this or a new loader over the
  // same file, batch and seq_len) continues with exactly the batches that would have come next.
  // restore() throws nexus::Error when the state's batch or seq_len differ from this loader's.
  DataLoaderState state() const;
  void restore(const DataLoaderState& state);

  int batch() const { return batch_; }
  int seq_len() const { return seq_len_; }

 private:
  struct Slot {
    std::vector<int32_t> inputs, targets;
    std::vector<uint64_t> offsets;
    std::array<uint64_t, 4> rng_after{};
    Batch view;
  };
  void fill(Slot& slot, uint64_t index);  // draws from rng_ (producer side only)
  void fill_document(Slot& slot, size_t row);
  void producer();
  void start();
  void stop();

  TokenFile file_;
  int batch_, seq_len_, prefetch_, rank_, world_;
  const Documents* documents_;
  std::vector<Slot> ring_;  // prefetch + 1 slots: the one handed out plus those being prefetched
  Xoshiro256 rng_;          // the producer's generator (ahead of the consumer)
  DataLoaderState consumed_;

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t base_ = 0;      // stream index of the first batch since start()
  uint64_t produced_ = 0;  // batches filled since start()
  int64_t held_ = -1;      // batch (since start()) the consumer holds, -1 for none
  double last_wait_ = 0, total_wait_ = 0;
};

// A deterministic pass over a (validation) file: windows start at 0, seq_len, 2 * seq_len, ...
// (inputs tile the file, each target row reaches one token further), grouped `batch` at a time.
class SequentialBatches {
 public:
  // Throws nexus::Error as DataLoader does when seq_len + 1 tokens do not fit.
  SequentialBatches(const TokenFile& file, int batch, int seq_len);

  // Fills the next batch; false at the end of the pass. The view stays valid until the next call.
  bool next(const Batch** out);
  void reset() { next_window_ = 0, index_ = 0; }
  uint64_t n_windows() const { return n_windows_; }
  uint64_t n_batches() const { return (n_windows_ + batch_ - 1) / batch_; }

 private:
  TokenFile file_;
  int batch_, seq_len_;
  uint64_t n_windows_, next_window_ = 0, index_ = 0;
  std::vector<int32_t> inputs_, targets_;
  std::vector<uint64_t> offsets_;
  Batch view_;
};

}  // namespace nexus
