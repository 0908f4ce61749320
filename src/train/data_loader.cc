// DataLoader: a producer thread fills ring slots in batch order from one RNG, so the stream is a
// pure function of the seed; the consumer's state is the RNG state stored with each batch.
#include "nexus/train/data_loader.h"

#include <algorithm>
#include <chrono>

namespace nexus {

namespace {

// Uniform in [0, range): the high half of a 64 x 64-bit product (Lemire), no division, and the
// same on every platform.
uint64_t bounded(uint64_t x, uint64_t range) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * range) >> 64);
}

}  // namespace

Status DataLoader::check(const TokenFile& file, int batch, int seq_len,
                         const Documents* documents) {
  if (batch < 1 || seq_len < 1)
    return Status::error("[data] batch and seq_len must be positive, got batch " +
                         std::to_string(batch) + ", seq_len " + std::to_string(seq_len));
  if (documents) {
    if (documents->size() == 0)
      return Status::error("[data] '" + file.path() + "' holds no document of 2 or more tokens");
    for (size_t d = 0; d < documents->size(); ++d) {
      // Target i predicts token begin + i + 1; the window holds targets i < seq_len.
      const uint64_t first = documents->loss_from[d], begin = documents->begin[d];
      if (first > begin + static_cast<uint64_t>(seq_len))
        return Status::error("[data] '" + file.path() + "': document " + std::to_string(d + 1) +
                             " trains on tokens from its token " + std::to_string(first - begin) +
                             " on, past a window of seq_len " + std::to_string(seq_len) +
                             "; raise --seq or shorten the documents");
    }
    return Status::ok();
  }
  if (static_cast<uint64_t>(seq_len) + 1 > file.size())
    return Status::error(
        "[data] '" + file.path() + "' holds " + std::to_string(file.size()) +
        " tokens, fewer than one window of seq_len + 1 = " + std::to_string(seq_len + 1));
  return Status::ok();
}

DataLoader::DataLoader(const TokenFile& file, int batch, int seq_len, uint64_t seed, int prefetch,
                       int rank, int world, const Documents* documents)
    : file_(file),
      batch_(batch),
      seq_len_(seq_len),
      prefetch_(prefetch),
      rank_(rank),
      world_(world),
      documents_(documents),
      rng_(seed) {
  if (Status st = check(file, batch, seq_len, documents); !st) throw Error(st.message());
  NEXUS_CHECK(prefetch >= 0, "[data] prefetch must be >= 0, got " + std::to_string(prefetch));
  NEXUS_CHECK(
      world >= 1 && rank >= 0 && rank < world,
      "[data] rank " + std::to_string(rank) + " of " + std::to_string(world) + " ranks is not one");
  ring_.resize(static_cast<size_t>(prefetch) + 1);
  const size_t n = static_cast<size_t>(batch) * static_cast<size_t>(seq_len);
  for (Slot& s : ring_) {
    s.inputs.resize(n);
    s.targets.resize(n);
    s.offsets.resize(static_cast<size_t>(batch));
    s.view.rows = batch;
    s.view.seq_len = seq_len;
    s.view.inputs = s.inputs;
    s.view.targets = s.targets;
    s.view.offsets = s.offsets;
  }
  consumed_.rng = rng_.state();
  consumed_.batch = batch * world;
  consumed_.seq_len = seq_len;
  start();
}

DataLoader::~DataLoader() { stop(); }

void DataLoader::fill(Slot& slot, uint64_t index) {
  const uint64_t range = file_.size() - static_cast<uint64_t>(seq_len_);
  const auto t = static_cast<size_t>(seq_len_);
  // The global batch's windows are drawn in order; this rank keeps its consecutive share.
  for (int skip = 0; skip < rank_ * batch_; ++skip) rng_.next_u64();
  for (size_t r = 0; r < static_cast<size_t>(batch_); ++r) {
    if (documents_) {
      fill_document(slot, r);
      continue;
    }
    const uint64_t off = bounded(rng_.next_u64(), range);
    slot.offsets[r] = off;
    file_.copy(off, std::span<int32_t>(slot.inputs).subspan(r * t, t));
    file_.copy(off + 1, std::span<int32_t>(slot.targets).subspan(r * t, t));
  }
  for (int skip = (rank_ + 1) * batch_; skip < world_ * batch_; ++skip) rng_.next_u64();
  slot.rng_after = rng_.state();
  slot.view.index = index;
}

void DataLoader::fill_document(Slot& slot, size_t row) {
  const Documents& docs = *documents_;
  const auto d = static_cast<size_t>(bounded(rng_.next_u64(), docs.size()));
  const uint64_t begin = docs.begin[d];
  const auto t = static_cast<size_t>(seq_len_);
  const auto n = static_cast<size_t>(std::min<uint64_t>(docs.end[d] - begin - 1, t));
  const std::span<int32_t> in = std::span<int32_t>(slot.inputs).subspan(row * t, t);
  const std::span<int32_t> tg = std::span<int32_t>(slot.targets).subspan(row * t, t);
  slot.offsets[row] = begin;
  file_.copy(begin, in.first(n));
  file_.copy(begin + 1, tg.first(n));
  for (size_t i = 0; i < n && begin + 1 + i < docs.loss_from[d]; ++i) tg[i] = -1;
  // Causal attention keeps the padding from reaching the document's positions.
  std::fill(in.begin() + static_cast<std::ptrdiff_t>(n), in.end(), in[n - 1]);
  std::fill(tg.begin() + static_cast<std::ptrdiff_t>(n), tg.end(), -1);
}

void DataLoader::producer() {
  for (;;) {
    uint64_t k;
    {
      std::unique_lock<std::mutex> lk(mu_);
      // Slot k % (prefetch + 1) is free once the consumer holds batch k - prefetch or later.
      cv_.wait(lk,
               [&] { return stop_ || static_cast<int64_t>(produced_) < held_ + 1 + prefetch_; });
      if (stop_) return;
      k = produced_;
    }
    fill(ring_[k % ring_.size()], base_ + k);
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++produced_;
    }
    cv_.notify_all();
  }
}

void DataLoader::start() {
  rng_ = Xoshiro256(consumed_.rng);
  base_ = consumed_.batches;
  produced_ = 0;
  held_ = -1;
  stop_ = false;
  if (prefetch_ > 0) thread_ = std::thread([this] { producer(); });
}

void DataLoader::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const Batch& DataLoader::next() {
  const uint64_t k = consumed_.batches - base_;
  Slot* slot;
  if (prefetch_ == 0) {
    slot = &ring_[0];
    fill(*slot, consumed_.batches);
    last_wait_ = 0;
  } else {
    std::unique_lock<std::mutex> lk(mu_);
    held_ = static_cast<int64_t>(k);  // releases the previous slot
    cv_.notify_all();
    const auto t0 = std::chrono::steady_clock::now();
    cv_.wait(lk, [&] { return produced_ > k; });
    last_wait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slot = &ring_[k % ring_.size()];
  }
  total_wait_ += last_wait_;
  consumed_.batches += 1;
  consumed_.rng = slot->rng_after;
  return slot->view;
}

DataLoaderState DataLoader::state() const { return consumed_; }

void DataLoader::restore(const DataLoaderState& state) {
  NEXUS_CHECK(state.batch == batch_ * world_ && state.seq_len == seq_len_,
              "[data] restore: state is for a global batch of " + std::to_string(state.batch) +
                  ", seq_len " + std::to_string(state.seq_len) + "; this loader has " +
                  std::to_string(batch_ * world_) + " (" + std::to_string(world_) + " x " +
                  std::to_string(batch_) + "), seq_len " + std::to_string(seq_len_));
  stop();
  consumed_ = state;
  start();
}

SequentialBatches::SequentialBatches(const TokenFile& file, int batch, int seq_len)
    : file_(file), batch_(batch), seq_len_(seq_len) {
  if (Status st = DataLoader::check(file, batch, seq_len); !st) throw Error(st.message());
  n_windows_ = (file.size() - 1) / static_cast<uint64_t>(seq_len);
  const size_t n = static_cast<size_t>(batch) * static_cast<size_t>(seq_len);
  inputs_.resize(n);
  targets_.resize(n);
  offsets_.resize(static_cast<size_t>(batch));
  view_.seq_len = seq_len;
}

bool SequentialBatches::next(const Batch** out) {
  if (next_window_ >= n_windows_) return false;
  const auto t = static_cast<size_t>(seq_len_);
  const auto rows = static_cast<size_t>(
      std::min<uint64_t>(static_cast<uint64_t>(batch_), n_windows_ - next_window_));
  for (size_t r = 0; r < rows; ++r) {
    const uint64_t off = (next_window_ + r) * t;
    offsets_[r] = off;
    file_.copy(off, std::span<int32_t>(inputs_).subspan(r * t, t));
    file_.copy(off + 1, std::span<int32_t>(targets_).subspan(r * t, t));
  }
  next_window_ += rows;
  view_.rows = static_cast<int>(rows);
  view_.index = index_++;
  view_.inputs = std::span<const int32_t>(inputs_).first(rows * t);
  view_.targets = std::span<const int32_t>(targets_).first(rows * t);
  view_.offsets = std::span<const uint64_t>(offsets_).first(rows);
  *out = &view_;
  return true;
}

}  // namespace nexus
