// Tensor: a typed, shaped view of memory (owned, arena-backed or memory-mapped from a model file).
// Shapes are outermost-first like PyTorch: a weight matrix of n_out rows of n_in elements has
// shape {n_out, n_in}. Block-quantized types are contiguous along the last (row) dimension.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nexus/device.h"
#include "nexus/dtype.h"

namespace nexus {

constexpr int kMaxDims = 4;

class Tensor {
 public:
  Tensor() = default;
  // A view of `data` on `device` (not owned; `keepalive` may hold the owner, e.g. a mapped file
  // or a device allocation).
  Tensor(DType dtype, std::vector<int64_t> shape, void* data,
         std::shared_ptr<void> keepalive = nullptr, Device device = Device::cpu());
  // A zero-filled tensor that owns 64-byte aligned host memory (ops/device.h: on other devices).
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return shape_[i]; }
  std::vector<int64_t> shape() const { return {shape_.begin(), shape_.begin() + rank_}; }
  // Byte stride of dimension i (the last dimension is contiguous).
  size_t stride_bytes(int i) const { return strides_[i]; }
  int64_t numel() const;
  size_t nbytes() const;
  // Number of rows (product of all but the last dim) and elements per row (the last dim).
  int64_t rows() const { return numel() / (rank_ ? shape_[rank_ - 1] : 1); }
  int64_t cols() const { return rank_ ? shape_[rank_ - 1] : 1; }

  // Where data() lives: host memory for the CPU, else a device address the host must not read.
  Device device() const { return device_; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const { return static_cast<T*>(data_); }
  // Pointer to row r (rows are laid out contiguously with stride_bytes(rank-2)).
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data_) + static_cast<size_t>(r) * row_stride();
  }
  size_t row_stride() const { return rank_ >= 2 ? strides_[rank_ - 2] : nbytes(); }
  bool empty() const { return data_ == nullptr; }
  std::string shape_str() const;

 private:
  DType dtype_ = DType::kF32;
  int rank_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<size_t, kMaxDims> strides_{};
  void* data_ = nullptr;
  std::shared_ptr<void> keepalive_;
  Device device_;
};

}  // namespace nexus
