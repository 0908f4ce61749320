// Tensor construction, shape arithmetic and owning allocation.
#include "nexus/tensor.h"

#include <cstdlib>
#include <cstring>

#include "nexus/core/allocator.h"
#include "nexus/status.h"

namespace nexus {

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, void* data,
               std::shared_ptr<void> keepalive, Device device)
    : dtype_(dtype), data_(data), keepalive_(std::move(keepalive)), device_(device) {
  NEXUS_CHECK(shape.size() <= kMaxDims,
              "[tensor] rank " + std::to_string(shape.size()) + " exceeds " +
                  std::to_string(kMaxDims));
  rank_ = static_cast<int>(shape.size());
  for (int i = 0; i < rank_; ++i) {
    NEXUS_CHECK(shape[i] >= 0, "[tensor] negative dimension " + std::to_string(shape[i]));
    shape_[i] = shape[i];
  }
  if (rank_ > 0) {
    strides_[rank_ - 1] = traits(dtype).block_bytes;
    size_t s = row_bytes(dtype, shape_[rank_ - 1]);
    for (int i = rank_ - 2; i >= 0; --i) {
      strides_[i] = s;
      s *= static_cast<size_t>(shape_[i]);
    }
  }
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor probe(dtype, shape, nullptr);
  const size_t n = probe.nbytes();
  std::shared_ptr<void> mem = aligned_shared(n, MemCategory::kActivations);
  std::memset(mem.get(), 0, n);
  void* p = mem.get();
  return Tensor(dtype, std::move(shape), p, std::move(mem));
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= shape_[i];
  return n;
}

size_t Tensor::nbytes() const {
  if (rank_ == 0) return traits(dtype_).block_bytes;
  return row_bytes(dtype_, shape_[rank_ - 1]) * static_cast<size_t>(rows());
}

std::string Tensor::shape_str() const {
  std::string s;
  for (int i = 0; i < rank_; ++i) s += (i ? "x" : "") + std::to_string(shape_[i]);
  return s.empty() ? "scalar" : s;
}

}  // namespace nexus
