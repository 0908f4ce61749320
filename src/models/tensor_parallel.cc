// Megatron's weight split (models/tensor_parallel.h) and the tensor-parallel config.
#include "models/tensor_parallel.h"

#include <cstdlib>
#include <cstring>

#include "models/arch.h"

namespace nexus {

Status check_tensor_parallel(const ModelConfig& c, int size) {
  if (size < 1)
    return Status::error("tensor parallel size " + std::to_string(size) + " must be >= 1");
  if (size == 1) return Status::ok();
  if (c.has_recurrent())
    return Status::error("tensor parallel splits attention heads and the feed-forward width; " +
                         c.arch_name + " has state-space layers, which it does not split");
  if (c.memory_segment)
    return Status::error("tensor parallel does not split " + c.arch_name +
                         "'s long-term memory and its per-head gates");
  const auto divides = [&](const char* what, int64_t n) -> Status {
    if (n % size == 0) return Status::ok();
    return Status::error("tensor parallel over " + std::to_string(size) + " ranks: " + what + " (" +
                         std::to_string(n) + ") is not a multiple of " + std::to_string(size));
  };
  NEXUS_RETURN_IF_ERROR(divides("the attention heads", c.n_heads));
  NEXUS_RETURN_IF_ERROR(divides("the key/value heads", c.n_kv_heads));
  return divides("the feed-forward width", c.ffn_dim);
}

ModelConfig tensor_parallel_config(const ModelConfig& full, int size) {
  ModelConfig c = full;
  c.n_heads /= size;
  c.n_kv_heads /= size;
  c.ffn_dim /= size;
  return c;
}

int64_t TpSplit::count() const {
  int64_t n = 0;
  for (const auto& r : ranges) n += r.second;
  return n;
}

namespace {

// The LayerWeights member a block tensor's name fills; null outside the blocks.
Tensor LayerWeights::*block_field(const ModelConfig& c, const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return nullptr;
  const int layer = std::atoi(name.c_str() + 4);
  for (const LayerSlot& slot : arch_spec(c.arch).layer_slots(c))
    if (layer_tensor_name(slot.name, layer) == name) return slot.field;
  return nullptr;
}

}  // namespace

bool tp_partial_grad(const ModelConfig& c, const std::string& name) {
  Tensor LayerWeights::*field = block_field(c, name);
  return field == &LayerWeights::q_norm || field == &LayerWeights::k_norm;
}

TpSplit tp_split(const ModelConfig& c, const std::string& name, int rank, int size) {
  TpSplit s;
  if (size <= 1) return s;
  Tensor LayerWeights::*field = block_field(c, name);
  if (field == nullptr) return s;
  const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
  const int64_t qs = qw / size, ks = kvw / size, fs = c.ffn_dim / size;
  const auto rows = [&](std::vector<std::pair<int64_t, int64_t>> r) {
    s.kind = TpSplit::kRows;
    s.ranges = std::move(r);
  };
  const auto cols = [&](int64_t first, int64_t count) {
    s.kind = TpSplit::kCols;
    s.ranges = {{first, count}};
  };
  using W = LayerWeights;
  if (field == &W::wq || field == &W::bq) rows({{rank * qs, qs}});
  if (field == &W::wk || field == &W::wv || field == &W::bk || field == &W::bv)
    rows({{rank * ks, ks}});
  if (field == &W::wqkv || field == &W::bqkv)  // q rows, then k, then v
    rows({{rank * qs, qs}, {qw + rank * ks, ks}, {qw + kvw + rank * ks, ks}});
  if (field == &W::w_gate || field == &W::w_up || field == &W::b_up) rows({{rank * fs, fs}});
  if (field == &W::wo) cols(rank * qs, qs);
  if (field == &W::w_down) cols(rank * fs, fs);
  return s;
}

std::vector<int64_t> tp_slice_shape(const std::vector<int64_t>& full, const TpSplit& s) {
  std::vector<int64_t> shape = full;
  if (s.kind == TpSplit::kRows) shape.front() = s.count();
  if (s.kind == TpSplit::kCols) shape.back() = s.count();
  return shape;
}

namespace {

// Calls fn(full byte offset, slice byte offset, bytes) for every contiguous run of the slice.
template <class Fn>
void runs(DType dtype, const std::vector<int64_t>& full, const TpSplit& s, Fn fn) {
  const int64_t cols = full.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < full.size(); ++i) rows *= full[i];
  const size_t row = row_bytes(dtype, cols);
  if (s.kind == TpSplit::kWhole) {
    fn(0, 0, row * static_cast<size_t>(rows));
    return;
  }
  if (s.kind == TpSplit::kRows) {
    // A vector's elements are its rows here.
    const size_t unit = full.size() == 1 ? row_bytes(dtype, 1) : row;
    size_t at = 0;
    for (const auto& [first, count] : s.ranges) {
      fn(static_cast<size_t>(first) * unit, at, static_cast<size_t>(count) * unit);
      at += static_cast<size_t>(count) * unit;
    }
    return;
  }
  const size_t slice_row = row_bytes(dtype, s.count());
  for (int64_t r = 0; r < rows; ++r) {
    size_t at = static_cast<size_t>(r) * slice_row;
    for (const auto& [first, count] : s.ranges) {
      const size_t off = row_bytes(dtype, first), n = row_bytes(dtype, count);
      fn(static_cast<size_t>(r) * row + off, at, n);
      at += n;
    }
  }
}

}  // namespace

Status tp_slice(const void* full, DType dtype, const std::vector<int64_t>& full_shape,
                const TpSplit& s, void* out, const std::string& name) {
  const int64_t block = traits(dtype).block_size;
  if (s.kind == TpSplit::kCols)
    for (const auto& [first, count] : s.ranges)
      if (first % block != 0 || count % block != 0)
        return Status::error(name + " (" + std::string(dtype_name(dtype)) + ", blocks of " +
                             std::to_string(block) + " values) cannot be split into columns of " +
                             std::to_string(count) + " for tensor parallelism");
  const auto* src = static_cast<const uint8_t*>(full);
  auto* dst = static_cast<uint8_t*>(out);
  runs(dtype, full_shape, s,
       [&](size_t f, size_t o, size_t n) { std::memcpy(dst + o, src + f, n); });
  return Status::ok();
}

void tp_unslice(const void* slice, DType dtype, const std::vector<int64_t>& full_shape,
                const TpSplit& s, void* full) {
  const auto* src = static_cast<const uint8_t*>(slice);
  auto* dst = static_cast<uint8_t*>(full);
  runs(dtype, full_shape, s,
       [&](size_t f, size_t o, size_t n) { std::memcpy(dst + f, src + o, n); });
}

}  // namespace nexus
