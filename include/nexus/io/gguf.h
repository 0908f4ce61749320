// GGUF v2/v3 reader (memory-mapped, zero-copy tensor data) and writer. Every count, length and
// offset read from a file is checked against the bytes that remain, so a malformed or hostile
// file yields an error naming the problem and its offset, never a crash or a huge allocation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/dtype.h"
#include "nexus/status.h"
#include "nexus/tensor.h"

namespace nexus {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Integers (and bools) are held in `i` (unsigned 64-bit values above
// INT64_MAX in `u`), floats in `f`, strings in `s`; arrays hold their elements in the vector
// matching the element kind (integers and bools in `ai`, floats in `af`, strings in `as`).
struct GgufValue {
  GgufType type = GgufType::kU32;
  GgufType array_type = GgufType::kU8;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ai;
  std::vector<double> af;
  std::vector<std::string> as;

  size_t array_size() const { return ai.size() + af.size() + as.size(); }
  // A short human-readable rendering (arrays abbreviated).
  std::string to_string() const;
};

// Shorthands for building metadata values.
GgufValue gguf_str(std::string v);
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_u64(uint64_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
GgufValue gguf_str_array(std::vector<std::string> v);
GgufValue gguf_f32_array(std::vector<double> v);
GgufValue gguf_i32_array(std::vector<int64_t> v);

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first (GGUF stores innermost first)
  uint64_t offset = 0;         // relative to the start of the data section
  size_t nbytes = 0;
  const uint8_t* data = nullptr;
};

class MappedFile;

class GgufFile {
 public:
  // Maps and parses `path`.
  static Result<GgufFile> open(const std::string& path);
  // Parses an in-memory image; `keepalive` owns the bytes (may be null if the caller keeps them).
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::shared_ptr<void> keepalive,
                                const std::string& name);

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  size_t data_offset() const { return data_offset_; }
  uint32_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;   // any integer type or bool
  std::optional<double> get_float(std::string_view key) const;  // any float or integer type
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  const std::vector<double>* get_float_array(std::string_view key) const;
  const std::vector<int64_t>* get_int_array(std::string_view key) const;

  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Zero-copy Tensor view of a tensor's data (keeps the mapping alive).
  Tensor tensor(const GgufTensorInfo& info) const;

 private:
  uint32_t version_ = 0;
  std::string path_;
  size_t size_ = 0;
  size_t data_offset_ = 0;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::shared_ptr<void> keepalive_;
};

// Builds a GGUF v3 file: metadata in insertion order, tensors aligned to `alignment`.
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue v);
  void set_string(const std::string& key, std::string v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string_array(const std::string& key, std::vector<std::string> v);
  void set_f32_array(const std::string& key, std::vector<double> v);
  void set_i32_array(const std::string& key, std::vector<int64_t> v);
  // Copies every key of `src` except those for which `skip(key)` is true.
  void copy_metadata(const GgufFile& src, bool (*skip)(std::string_view) = nullptr);
  // Adds a tensor; `data` must hold row_bytes(dtype, shape.back()) * rows bytes and is copied.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const void* data);
  // Data alignment (a power of two); stored as the general.alignment key, which also governs a
  // value copied in by copy_metadata (the last one set wins).
  void set_alignment(uint32_t a) { set_u32("general.alignment", a); }
  uint32_t alignment() const;

  // The whole file image.
  std::vector<uint8_t> serialize() const;
  // Writes atomically (temp file, fsync, rename).
  Status write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace nexus
