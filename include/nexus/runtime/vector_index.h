// A flat vector index for embedding search (`nexus index build`, the server's /v1/search): ids and
// L2-normalised vectors stored as f32, f16 or int8 (per-row scale), searched exactly by inner
// product (= cosine) with the topk_search op. The file (.nxvi) records the model that made the
// vectors, so queries are embedded by the same one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nexus/core/thread_pool.h"
#include "nexus/dtype.h"
#include "nexus/status.h"

namespace nexus {

// The row types: "f32" | "f16" | "int8" (DType kF32, kF16, kI8), and back; errors name the text.
Result<DType> parse_vector_type(const std::string& name);
const char* vector_type_name(DType t);

class VectorIndex {
 public:
  struct Hit {
    std::string id;
    float score;
    int64_t row;
  };

  // n = ids.size() vectors of `dim` floats (normalised here), stored as `type`. `model` names the
  // embedding model (its file name and width, for the check at query time).
  static Result<VectorIndex> build(std::vector<std::string> ids, std::span<const float> vectors,
                                   int64_t dim, DType type, std::string model);
  // Errors name the file and what is wrong with it (magic, version, sizes, truncation).
  static Result<VectorIndex> load(const std::string& path);
  // load(), and an error naming both models unless the index was built with the model at
  // `model_path` (index_model_label of it and its width `dim`).
  static Result<VectorIndex> load_for_model(const std::string& path, const std::string& model_path,
                                            int64_t dim);
  Status save(const std::string& path) const;  // atomic

  // The k best rows for each of nq queries (normalised here), best first (fewer when the index
  // holds fewer rows).
  std::vector<std::vector<Hit>> search(std::span<const float> queries, int64_t nq, int64_t k,
                                       ThreadPool* pool = nullptr) const;

  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  int64_t dim() const { return dim_; }
  DType type() const { return type_; }
  const std::string& model() const { return model_; }
  size_t bytes() const { return rows_.size() + scales_.size() * sizeof(float); }

 private:
  std::vector<std::string> ids_;
  int64_t dim_ = 0;
  DType type_ = DType::kF32;
  std::string model_;
  std::vector<uint8_t> rows_;  // n * dim values of type_
  std::vector<float> scales_;  // int8: per row
};

// What an index records as its embedding model: the model file's name and its width.
std::string index_model_label(const std::string& model_path, int64_t dim);

// x / |x| in place (zero stays zero).
void l2_normalize(std::span<float> x);

}  // namespace nexus
