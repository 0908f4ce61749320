// VectorIndex (vector_index.h): the .nxvi file is a header (magic "NXVI", version, type, dim, n,
// the model's name), the ids (length-prefixed), int8's scales, then the rows.
#include "nexus/runtime/vector_index.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "nexus/dtype.h"
#include "nexus/io/mapped_file.h"
#include "ops/similarity.h"

namespace nexus {
namespace {

constexpr char kMagic[4] = {'N', 'X', 'V', 'I'};
constexpr uint32_t kVersion = 1;

size_t width(DType t) { return t == DType::kF32 ? 4 : t == DType::kF16 ? 2 : 1; }

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads from a byte string, failing once past its end.
struct Reader {
  std::string_view s;
  size_t at = 0;
  bool ok = true;
  template <class T>
  T get() {
    T v{};
    if (!take(&v, sizeof v)) return T{};
    return v;
  }
  bool take(void* out, size_t n) {
    if (!ok || s.size() - at < n) return ok = false;
    std::memcpy(out, s.data() + at, n);
    at += n;
    return true;
  }
};

}  // namespace

Result<DType> parse_vector_type(const std::string& name) {
  if (name == "f32") return DType::kF32;
  if (name == "f16") return DType::kF16;
  if (name == "int8") return DType::kI8;
  return Status::error("vector type '" + name + "' is not f32, f16 or int8");
}

const char* vector_type_name(DType t) {
  return t == DType::kF32 ? "f32" : t == DType::kF16 ? "f16" : "int8";
}

std::string index_model_label(const std::string& model_path, int64_t dim) {
  const size_t slash = model_path.find_last_of('/');
  return (slash == std::string::npos ? model_path : model_path.substr(slash + 1)) + ":" +
         std::to_string(dim);
}

void l2_normalize(std::span<float> x) {
  double n = 0;
  for (float v : x) n += static_cast<double>(v) * v;
  if (n <= 0) return;
  const auto inv = static_cast<float>(1.0 / std::sqrt(n));
  for (float& v : x) v *= inv;
}

Result<VectorIndex> VectorIndex::build(std::vector<std::string> ids, std::span<const float> vectors,
                                       int64_t dim, DType type, std::string model) {
  const auto n = static_cast<int64_t>(ids.size());
  if (dim < 1 || static_cast<int64_t>(vectors.size()) != n * dim)
    return Status::error("index: " + std::to_string(vectors.size()) + " floats are not " +
                         std::to_string(n) + " vectors of " + std::to_string(dim));
  VectorIndex ix;
  ix.ids_ = std::move(ids);
  ix.dim_ = dim;
  ix.type_ = type;
  ix.model_ = std::move(model);
  ix.rows_.resize(static_cast<size_t>(n * dim) * width(type));
  if (type == DType::kI8) ix.scales_.resize(static_cast<size_t>(n));
  std::vector<float> row(static_cast<size_t>(dim));
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(vectors.data() + i * dim, dim, row.begin());
    l2_normalize(row);
    uint8_t* out = ix.rows_.data() + static_cast<size_t>(i * dim) * width(type);
    if (type == DType::kF32) {
      std::memcpy(out, row.data(), row.size() * 4);
    } else if (type == DType::kF16) {
      auto* h = reinterpret_cast<uint16_t*>(out);
      for (int64_t c = 0; c < dim; ++c) h[c] = f32_to_f16(row[c]);
    } else {
      float amax = 0;
      for (float v : row) amax = std::max(amax, std::abs(v));
      const float scale = amax > 0 ? amax / 127.0f : 1.0f;
      ix.scales_[i] = scale;
      auto* q = reinterpret_cast<int8_t*>(out);
      for (int64_t c = 0; c < dim; ++c)
        q[c] = static_cast<int8_t>(std::clamp(std::lround(row[c] / scale), -127L, 127L));
    }
  }
  return ix;
}

Status VectorIndex::save(const std::string& path) const {
  std::string out(kMagic, 4);
  put(out, kVersion);
  put(out, static_cast<uint32_t>(type_));
  put(out, static_cast<uint64_t>(dim_));
  put(out, static_cast<uint64_t>(ids_.size()));
  put(out, static_cast<uint32_t>(model_.size()));
  out += model_;
  for (const std::string& id : ids_) {
    put(out, static_cast<uint32_t>(id.size()));
    out += id;
  }
  out.append(reinterpret_cast<const char*>(scales_.data()), scales_.size() * sizeof(float));
  out.append(reinterpret_cast<const char*>(rows_.data()), rows_.size());
  return write_file_atomic(path, out.data(), out.size());
}

Result<VectorIndex> VectorIndex::load(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.status();
  const auto bad = [&](const std::string& why) {
    return Status::error(path + ": not a vector index (" + why + ")");
  };
  Reader r{*bytes};
  char magic[4];
  if (!r.take(magic, 4) || std::memcmp(magic, kMagic, 4) != 0) return bad("no NXVI magic");
  const auto version = r.get<uint32_t>();
  if (r.ok && version != kVersion)
    return bad("version " + std::to_string(version) + ", this build reads " +
               std::to_string(kVersion));
  const auto type = r.get<uint32_t>();
  const auto dim = r.get<uint64_t>(), n = r.get<uint64_t>();
  const auto model_len = r.get<uint32_t>();
  if (!r.ok) return bad("truncated header");
  if (type != static_cast<uint32_t>(DType::kF32) && type != static_cast<uint32_t>(DType::kF16) &&
      type != static_cast<uint32_t>(DType::kI8))
    return bad("row type " + std::to_string(type));
  if (dim < 1 || dim > (1u << 20) || n > (1ull << 32)) return bad("dim or count out of range");
  VectorIndex ix;
  ix.type_ = static_cast<DType>(type);
  ix.dim_ = static_cast<int64_t>(dim);
  ix.model_.resize(model_len);
  if (!r.take(ix.model_.data(), model_len)) return bad("truncated header");
  ix.ids_.resize(n);
  for (std::string& id : ix.ids_) {
    const auto len = r.get<uint32_t>();
    if (!r.ok || len > bytes->size()) return bad("truncated ids");
    id.resize(len);
    if (!r.take(id.data(), len)) return bad("truncated ids");
  }
  if (ix.type_ == DType::kI8) {
    ix.scales_.resize(n);
    if (!r.take(ix.scales_.data(), n * sizeof(float))) return bad("truncated scales");
  }
  const size_t want = n * dim * width(ix.type_);
  if (bytes->size() - r.at != want)
    return bad("the rows take " + std::to_string(bytes->size() - r.at) + " bytes, expected " +
               std::to_string(want));
  ix.rows_.resize(want);
  r.take(ix.rows_.data(), want);
  return ix;
}

Result<VectorIndex> VectorIndex::load_for_model(const std::string& path,
                                                const std::string& model_path, int64_t dim) {
  auto ix = load(path);
  if (!ix) return ix;
  if (const std::string label = index_model_label(model_path, dim); ix->model() != label)
    return Status::error(path + " was built with " + ix->model() + ", not " + label +
                         "; use the model that built it");
  return ix;
}

std::vector<std::vector<VectorIndex::Hit>> VectorIndex::search(std::span<const float> queries,
                                                               int64_t nq, int64_t k,
                                                               ThreadPool* pool) const {
  NEXUS_CHECK(static_cast<int64_t>(queries.size()) == nq * dim_ && k >= 1,
              "[index] " + std::to_string(queries.size()) + " floats are not " +
                  std::to_string(nq) + " queries of " + std::to_string(dim_));
  std::vector<float> q(queries.begin(), queries.end());
  for (int64_t i = 0; i < nq; ++i) l2_normalize(std::span<float>(q).subspan(i * dim_, dim_));
  std::vector<float> scores(static_cast<size_t>(nq * k));
  std::vector<int64_t> rows(static_cast<size_t>(nq * k));
  topk_search({q.data(), nq, dim_, rows_.data(), type_, scales_.data(), size(), k, scores.data(),
               rows.data()},
              pool);
  std::vector<std::vector<Hit>> out(static_cast<size_t>(nq));
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < k; ++j)
      if (const int64_t row = rows[i * k + j]; row >= 0)
        out[i].push_back({ids_[row], scores[i * k + j], row});
  return out;
}

}  // namespace nexus
