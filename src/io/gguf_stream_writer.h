// Streaming GGUF v3 writer: the header and tensor table go out first, then each tensor's bytes are
// produced by a callback, a chunk of rows at a time, while the file is written. A multi-gigabyte
// model is therefore never held in memory; the file appears atomically (temp file, fsync, rename).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "nexus/io/gguf.h"

namespace nexus {

class GgufStreamWriter {
 public:
  // Writes rows [row0, row0 + n_rows) of a tensor into `out` (n_rows * row_bytes bytes, where
  // row_bytes = row_bytes(dtype, shape.back())). May throw; write() turns that into a Status.
  using RowProducer = std::function<void(int64_t row0, int64_t n_rows, uint8_t* out)>;

  // Sets (or replaces) a metadata key; keys are written in first-set order.
  void set(const std::string& key, GgufValue v);
  // Declares a tensor (shape outermost first); its bytes come from `produce` during write(), in
  // declaration order. Throws nexus::Error on a duplicate name or a row length that does not fit
  // the type's block size.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  RowProducer produce);
  void set_alignment(uint32_t a) { alignment_ = a; }
  // Most bytes requested from a producer at once (default 4 MiB, the size of the copy buffer a
  // training run's checkpoints and exports add to its peak memory; at least one row).
  void set_chunk_bytes(size_t n) { chunk_bytes_ = n; }

  // Size in bytes of the file write() will produce.
  size_t file_size() const;
  // Streams the file to `path` atomically; errors name the path and the reason (I/O error or the
  // message of an exception thrown by a producer).
  Status write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    int64_t rows;
    size_t row_bytes;
    RowProducer produce;
  };
  std::vector<uint8_t> header() const;

  uint32_t alignment_ = 32;
  size_t chunk_bytes_ = size_t{4} << 20;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Entry> tensors_;
};

}  // namespace nexus
