// safetensors: an 8-byte little-endian header length, a JSON object mapping each tensor name to
// {dtype, shape, data_offsets: [begin, end)} relative to the end of the header (plus an optional
// "__metadata__" object of strings), then the data. The format allows no gaps between tensors;
// nexus only needs every range inside the file, sized as its shape says, and disjoint.
#include "nexus/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "nexus/io/mapped_file.h"

namespace nexus {
namespace {

using nlohmann::json;

// A generous bound: real headers are a few hundred KiB; this stops a corrupt length from being
// taken as a request to parse gigabytes of tensor data as JSON.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

std::optional<DType> dtype_of(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  return std::nullopt;
}

size_t element_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

}  // namespace

int64_t SafetensorsTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto m = MappedFile::open(path);
  if (!m) return m.status();
  std::shared_ptr<MappedFile> mf = std::move(m).value();
  return parse({mf->data(), mf->size()}, mf, path);
}

Result<SafetensorsFile> SafetensorsFile::parse(std::span<const uint8_t> bytes,
                                               std::shared_ptr<const void> keepalive,
                                               const std::string& name) {
  auto fail = [&name](const std::string& what) {
    return Status::error("safetensors: " + name + ": " + what);
  };
  if (bytes.size() < 8)
    return fail("file is " + std::to_string(bytes.size()) +
                " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > bytes.size() - 8)
    return fail("header length " + std::to_string(header_len) + " runs past the end of the " +
                std::to_string(bytes.size()) + "-byte file (truncated, or not safetensors)");
  if (header_len > kMaxHeaderBytes)
    return fail("header length " + std::to_string(header_len) + " exceeds " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    return fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) return fail("header is not a JSON object");

  SafetensorsFile f;
  f.path_ = name;
  f.keepalive_ = std::move(keepalive);
  const uint8_t* data = bytes.data() + 8 + header_len;
  const uint64_t data_size = bytes.size() - 8 - header_len;
  for (const auto& [key, v] : header.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) return fail("__metadata__ is not an object");
      for (const auto& [mk, mv] : v.items())
        if (mv.is_string()) f.metadata_[mk] = mv.get<std::string>();
      continue;
    }
    auto bad = [&](const std::string& what) { return fail("tensor '" + key + "': " + what); };
    if (!v.is_object()) return bad("entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return bad("no dtype string");
    if (sh == v.end() || !sh->is_array()) return bad("no shape array");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      return bad("data_offsets is not a pair of non-negative integers");
    const std::string dname = dt->get<std::string>();
    auto dtype = dtype_of(dname);
    if (!dtype) return bad("dtype " + dname + " is not supported (nexus reads F32, F16 and BF16)");
    SafetensorsTensor t;
    t.name = key;
    t.dtype = *dtype;
    // The element count is bounded by the data size, so checking each step keeps it exact.
    uint64_t numel = 1;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) return bad("shape holds a value that is not a count");
      const uint64_t n = d.get<uint64_t>();
      if (n != 0 && numel > data_size / n) return bad("shape is larger than the file");
      numel *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end || end > data_size)
      return bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 ") lie outside the " + std::to_string(data_size) + " data bytes");
    const uint64_t want = numel * element_bytes(t.dtype);
    if (end - begin != want)
      return bad("data_offsets hold " + std::to_string(end - begin) + " bytes but " + dname +
                 " of this shape needs " + std::to_string(want));
    t.bytes = {data + begin, static_cast<size_t>(end - begin)};
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.bytes.data() != b.bytes.data() ? a.bytes.data() < b.bytes.data()
                                                      : a.bytes.size() < b.bytes.size();
            });
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    const SafetensorsTensor& t = f.tensors_[i];
    if (i > 0) {
      const SafetensorsTensor& p = f.tensors_[i - 1];
      // Empty tensors own no bytes, so they may share an offset with a neighbour.
      if (!t.bytes.empty() && p.bytes.data() + p.bytes.size() > t.bytes.data())
        return fail("tensors '" + p.name + "' and '" + t.name + "' overlap");
    }
    f.index_[t.name] = i;
  }
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint c;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    auto text = read_file(index.string());
    if (!text) return text.status();
    json j;
    try {
      j = json::parse(text.value());
    } catch (const json::exception& e) {
      return Status::error("safetensors index: " + index.string() +
                           ": not valid JSON: " + e.what());
    }
    auto wm = j.is_object() ? j.find("weight_map") : j.end();
    if (wm == j.end() || !wm->is_object() || wm->empty())
      return Status::error("safetensors index: " + index.string() + ": no weight_map object");
    std::map<std::string, size_t> shard_of_file;
    for (const auto& [tensor, file] : wm->items()) {
      if (!file.is_string())
        return Status::error("safetensors index: " + index.string() + ": weight_map['" + tensor +
                             "'] is not a file name");
      const std::string fname = file.get<std::string>();
      if (fname.empty() || fname.find('/') != std::string::npos || fname == "." || fname == "..")
        return Status::error("safetensors index: " + index.string() + ": shard name '" + fname +
                             "' is not a file in the folder");
      auto it = shard_of_file.find(fname);
      if (it == shard_of_file.end()) {
        const std::string path = (fs::path(dir) / fname).string();
        auto f = SafetensorsFile::open(path);
        if (!f) return f.status();
        it = shard_of_file.emplace(fname, c.shards_.size()).first;
        c.shards_.push_back(std::make_shared<SafetensorsFile>(std::move(f).value()));
        c.files_.push_back(path);
      }
      const SafetensorsTensor* t = c.shards_[it->second]->find(tensor);
      if (t == nullptr)
        return Status::error("safetensors index: " + index.string() + ": tensor '" + tensor +
                             "' is not in " + fname + " as its weight_map says");
      c.by_name_[tensor] = t;
    }
    // A tensor in a shard but absent from the map would be silently dropped: refuse instead.
    for (size_t s = 0; s < c.shards_.size(); ++s)
      for (const SafetensorsTensor& t : c.shards_[s]->tensors())
        if (c.by_name_.find(t.name) == c.by_name_.end() || c.by_name_[t.name] != &t)
          return Status::error("safetensors index: " + index.string() + ": tensor '" + t.name +
                               "' of " + c.files_[s] + " is missing from (or elsewhere in) " +
                               "the weight_map");
    return c;
  }
  if (!fs::exists(single, ec))
    return Status::error("no model.safetensors or model.safetensors.index.json in '" + dir + "'");
  auto f = SafetensorsFile::open(single.string());
  if (!f) return f.status();
  c.shards_.push_back(std::make_shared<SafetensorsFile>(std::move(f).value()));
  c.files_.push_back(single.string());
  for (const SafetensorsTensor& t : c.shards_[0]->tensors()) c.by_name_[t.name] = &t;
  return c;
}

std::vector<const SafetensorsTensor*> SafetensorsCheckpoint::tensors() const {
  std::vector<const SafetensorsTensor*> out;
  out.reserve(by_name_.size());
  for (const auto& [name, t] : by_name_) out.push_back(t);
  return out;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace nexus
