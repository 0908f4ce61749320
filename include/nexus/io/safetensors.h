// Reader of Hugging Face safetensors files (memory-mapped, zero-copy) and of checkpoint folders
// that hold one file or several shards listed by model.safetensors.index.json. Every header field
// is checked against the file: a malformed header, a byte range past the end, ranges that overlap
// or do not match their shape and dtype give an error naming the file and tensor, never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/dtype.h"
#include "nexus/status.h"

namespace nexus {

// One tensor of a safetensors file: its dtype (F32, F16 or BF16), shape (outermost first, as
// PyTorch writes it) and bytes inside the mapping.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;

  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps and parses `path`.
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image; `keepalive` owns the bytes (may be null if the caller keeps them);
  // `name` names the file in errors.
  static Result<SafetensorsFile> parse(std::span<const uint8_t> bytes,
                                       std::shared_ptr<const void> keepalive,
                                       const std::string& name);

  const std::string& path() const { return path_; }
  // Tensors in the order of their data (the header's JSON order is not kept by every writer).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // The header's free-form "__metadata__" strings (e.g. {"format": "pt"}).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
  std::shared_ptr<const void> keepalive_;
};

// The weights of a Hugging Face checkpoint folder: `model.safetensors`, or the shards that
// `model.safetensors.index.json`'s weight_map names (each tensor must be in the shard the map
// says, and every shard is opened once).
class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> open(const std::string& dir);

  // Every tensor of every shard, sorted by name.
  std::vector<const SafetensorsTensor*> tensors() const;
  const SafetensorsTensor* find(std::string_view name) const;
  // The files read (one, or the shards in the index's order).
  const std::vector<std::string>& files() const { return files_; }

 private:
  std::vector<std::string> files_;
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> by_name_;
};

}  // namespace nexus
