// GGUF v3 writer and GgufValue rendering.
#include <algorithm>
#include <cstring>

#include "nexus/io/gguf.h"
#include "io/gguf_encode.h"
#include "nexus/io/mapped_file.h"

namespace nexus {
namespace {

using gguf_encode::put;
using gguf_encode::put_kv;
using gguf_encode::put_string;

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view kNames[] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                                "bool", "str", "arr", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? kNames[i] : "?";
}

std::string GgufValue::to_string() const {
  switch (type) {
    case GgufType::kString:
      return s.size() > 80 ? "\"" + s.substr(0, 77) + "...\"" : "\"" + s + "\"";
    case GgufType::kF32:
    case GgufType::kF64:
      return std::to_string(f);
    case GgufType::kBool:
      return i ? "true" : "false";
    case GgufType::kU64:
      return std::to_string(u);
    case GgufType::kArray: {
      std::string r = "[" + std::string(gguf_type_name(array_type)) + " x " +
                      std::to_string(array_size()) + "]";
      return r;
    }
    default:
      return std::to_string(i);
  }
}

GgufValue gguf_str(std::string v) {
  GgufValue g;
  g.type = GgufType::kString;
  g.s = std::move(v);
  return g;
}
GgufValue gguf_u32(uint32_t v) {
  GgufValue g;
  g.type = GgufType::kU32;
  g.i = v;
  return g;
}
GgufValue gguf_i32(int32_t v) {
  GgufValue g;
  g.type = GgufType::kI32;
  g.i = v;
  return g;
}
GgufValue gguf_u64(uint64_t v) {
  GgufValue g;
  g.type = GgufType::kU64;
  g.u = v;
  g.i = static_cast<int64_t>(v);
  return g;
}
GgufValue gguf_f32(float v) {
  GgufValue g;
  g.type = GgufType::kF32;
  g.f = v;
  return g;
}
GgufValue gguf_bool(bool v) {
  GgufValue g;
  g.type = GgufType::kBool;
  g.i = v;
  return g;
}
GgufValue gguf_str_array(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufType::kArray;
  g.array_type = GgufType::kString;
  g.as = std::move(v);
  return g;
}
GgufValue gguf_f32_array(std::vector<double> v) {
  GgufValue g;
  g.type = GgufType::kArray;
  g.array_type = GgufType::kF32;
  g.af = std::move(v);
  return g;
}
GgufValue gguf_i32_array(std::vector<int64_t> v) {
  GgufValue g;
  g.type = GgufType::kArray;
  g.array_type = GgufType::kI32;
  g.ai = std::move(v);
  return g;
}


void GgufWriter::set(const std::string& key, GgufValue v) {
  for (auto& kv : kv_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::set_string(const std::string& key, std::string v) {
  set(key, gguf_str(std::move(v)));
}
void GgufWriter::set_u32(const std::string& key, uint32_t v) { set(key, gguf_u32(v)); }
void GgufWriter::set_i32(const std::string& key, int32_t v) { set(key, gguf_i32(v)); }
void GgufWriter::set_u64(const std::string& key, uint64_t v) { set(key, gguf_u64(v)); }
void GgufWriter::set_f32(const std::string& key, float v) { set(key, gguf_f32(v)); }
void GgufWriter::set_bool(const std::string& key, bool v) { set(key, gguf_bool(v)); }
void GgufWriter::set_string_array(const std::string& key, std::vector<std::string> v) {
  set(key, gguf_str_array(std::move(v)));
}
void GgufWriter::set_f32_array(const std::string& key, std::vector<double> v) {
  set(key, gguf_f32_array(std::move(v)));
}
void GgufWriter::set_i32_array(const std::string& key, std::vector<int64_t> v) {
  set(key, gguf_i32_array(std::move(v)));
}

void GgufWriter::copy_metadata(const GgufFile& src, bool (*skip)(std::string_view)) {
  for (const auto& [k, v] : src.metadata())
    if (!skip || !skip(k)) set(k, v);
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data) {
  NEXUS_CHECK(!shape.empty() && shape.size() <= kMaxDims,
              "[gguf writer] tensor '" + name + "' has rank " + std::to_string(shape.size()));
  for (const auto& t : tensors_)
    NEXUS_CHECK(t.name != name, "[gguf writer] duplicate tensor '" + name + "'");
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  const size_t n = row_bytes(dtype, shape.back()) * static_cast<size_t>(rows);
  PendingTensor t{name, dtype, std::move(shape), {}};
  t.bytes.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n);
  tensors_.push_back(std::move(t));
}

uint32_t GgufWriter::alignment() const {
  for (const auto& [k, v] : kv_) {
    if (k != "general.alignment") continue;
    NEXUS_CHECK(v.type != GgufType::kString && v.type != GgufType::kArray && v.i > 0 &&
                    v.i <= (1 << 20) && (v.i & (v.i - 1)) == 0,
                "[gguf writer] general.alignment " + v.to_string() + " is not a power of two");
    return static_cast<uint32_t>(v.i);
  }
  return 32;
}

std::vector<uint8_t> GgufWriter::serialize() const {
  const uint32_t align = alignment();
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& [key, v] : kv_) put_kv(out, key, v);
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (size_t d = t.shape.size(); d-- > 0;) put<uint64_t>(out, t.shape[d]);
    put<uint32_t>(out, static_cast<uint32_t>(t.dtype));
    put<uint64_t>(out, offset);
    offset += (t.bytes.size() + align - 1) / align * align;
  }
  out.resize((out.size() + align - 1) / align * align, 0);
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    out.resize((out.size() + align - 1) / align * align, 0);
  }
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> img = serialize();
  return write_file_atomic(path, img.data(), img.size());
}

}  // namespace nexus
