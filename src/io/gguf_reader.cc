// GGUF parser: a bounds-checked cursor over the mapped bytes. Every length and count is checked
// against the bytes left before anything is allocated, so memory use stays O(file size), and every
// error names the problem and the byte offset where it was found.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "nexus/io/gguf.h"
#include "nexus/io/mapped_file.h"

namespace nexus {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint64_t kMaxDim = 1ull << 40;       // per dimension
constexpr uint64_t kMaxElements = 1ull << 50;  // per tensor; keeps byte counts far from overflow
constexpr int64_t kMaxAlignment = 1 << 20;

class Cursor {
 public:
  Cursor(std::span<const uint8_t> b, const std::string& name) : b_(b), name_(name) {}
  size_t pos() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }

  Status fail(const std::string& what) const { return fail_at(pos_, what); }
  Status fail_at(size_t at, const std::string& what) const {
    return Status::error("gguf: " + name_ + ": at offset " + std::to_string(at) + ": " + what);
  }

  template <typename T>
  Status read(T* out, const char* what) {
    if (left() < sizeof(T))
      return fail("file truncated while reading " + std::string(what) + " (need " +
                  std::to_string(sizeof(T)) + " bytes, " + std::to_string(left()) + " left)");
    std::memcpy(out, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }

  Status read_string(std::string* out, const char* what) {
    const size_t at = pos_;
    uint64_t n = 0;
    NEXUS_RETURN_IF_ERROR(read(&n, what));
    if (n > left())
      return fail_at(at, std::string(what) + " length " + std::to_string(n) + " runs past the end" +
                             " of the file (" + std::to_string(left()) + " bytes left)");
    if (n > kMaxStringBytes)
      return fail_at(at, std::string(what) + " length " + std::to_string(n) + " exceeds the " +
                             std::to_string(kMaxStringBytes) + "-byte limit");
    out->assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return Status::ok();
  }

 private:
  std::span<const uint8_t> b_;
  const std::string& name_;
  size_t pos_ = 0;
};

// Smallest encoded size of one element of `t` (used to bound array counts).
size_t min_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= 12; }

bool is_int_type(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kI8 || t == GgufType::kU16 || t == GgufType::kI16 ||
         t == GgufType::kU32 || t == GgufType::kI32 || t == GgufType::kU64 || t == GgufType::kI64 ||
         t == GgufType::kBool;
}

// Reads a T into `out` (an integer into GgufValue::i, a float into GgufValue::f).
template <typename T, typename Out>
Status read_into(Cursor& c, Out* out, const char* what) {
  T x;
  NEXUS_RETURN_IF_ERROR(c.read(&x, what));
  *out = static_cast<Out>(x);
  return Status::ok();
}

// Reads one non-array value of type `t`; `in_array` selects how u64 values are stored.
Status read_scalar(Cursor& c, GgufType t, GgufValue* v, bool in_array) {
  switch (t) {
    case GgufType::kU8:
      return read_into<uint8_t>(c, &v->i, "u8");
    case GgufType::kI8:
      return read_into<int8_t>(c, &v->i, "i8");
    case GgufType::kU16:
      return read_into<uint16_t>(c, &v->i, "u16");
    case GgufType::kI16:
      return read_into<int16_t>(c, &v->i, "i16");
    case GgufType::kU32:
      return read_into<uint32_t>(c, &v->i, "u32");
    case GgufType::kI32:
      return read_into<int32_t>(c, &v->i, "i32");
    case GgufType::kI64:
      return read_into<int64_t>(c, &v->i, "i64");
    case GgufType::kF32:
      return read_into<float>(c, &v->f, "f32");
    case GgufType::kF64:
      return read_into<double>(c, &v->f, "f64");
    case GgufType::kU64: {
      NEXUS_RETURN_IF_ERROR(read_into<uint64_t>(c, &v->u, "u64"));
      // Scalars clamp (the exact value stays in `u`); array elements keep the bit pattern so that
      // values above INT64_MAX survive a read/write round trip.
      constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      v->i = in_array || v->u <= kMax ? static_cast<int64_t>(v->u) : static_cast<int64_t>(kMax);
      return Status::ok();
    }
    case GgufType::kBool: {
      const size_t at = c.pos();
      NEXUS_RETURN_IF_ERROR(read_into<uint8_t>(c, &v->i, "bool"));
      if (v->i > 1) return c.fail_at(at, "bool value " + std::to_string(v->i) + " is not 0 or 1");
      return Status::ok();
    }
    case GgufType::kString:
      return c.read_string(&v->s, "string");
    case GgufType::kArray:
      return c.fail("nested arrays are not supported");
  }
  return Status::ok();
}

Status read_value(Cursor& c, GgufType t, GgufValue* v) {
  v->type = t;
  if (t != GgufType::kArray) return read_scalar(c, t, v, false);
  uint32_t et = 0;
  const size_t at = c.pos();
  NEXUS_RETURN_IF_ERROR(c.read(&et, "array element type"));
  if (!valid_type(et)) return c.fail_at(at, "unknown array element type " + std::to_string(et));
  if (et == static_cast<uint32_t>(GgufType::kArray))
    return c.fail_at(at, "nested arrays are not supported");
  v->array_type = static_cast<GgufType>(et);
  uint64_t n = 0;
  const size_t at_n = c.pos();
  NEXUS_RETURN_IF_ERROR(c.read(&n, "array length"));
  if (n > c.left() / min_size(v->array_type))
    return c.fail_at(at_n, "array length " + std::to_string(n) + " does not fit in the " +
                               std::to_string(c.left()) + " bytes left in the file");
  GgufValue e;
  if (v->array_type == GgufType::kString) {
    v->as.reserve(n);
    for (uint64_t k = 0; k < n; ++k) {
      NEXUS_RETURN_IF_ERROR(c.read_string(&e.s, "array string"));
      v->as.push_back(std::move(e.s));
    }
  } else if (v->array_type == GgufType::kF32 || v->array_type == GgufType::kF64) {
    v->af.reserve(n);
    for (uint64_t k = 0; k < n; ++k) {
      NEXUS_RETURN_IF_ERROR(read_scalar(c, v->array_type, &e, true));
      v->af.push_back(e.f);
    }
  } else {
    v->ai.reserve(n);
    for (uint64_t k = 0; k < n; ++k) {
      NEXUS_RETURN_IF_ERROR(read_scalar(c, v->array_type, &e, true));
      v->ai.push_back(e.i);
    }
  }
  return Status::ok();
}

// Reads one tensor info record (name, rank, dims innermost first, type, offset) and computes its
// byte size. `alignment` is the file's data alignment (offsets must be multiples of it).
Status read_tensor_info(Cursor& c, uint32_t alignment, GgufTensorInfo* ti) {
  NEXUS_RETURN_IF_ERROR(c.read_string(&ti->name, "tensor name"));
  const std::string what = "tensor '" + ti->name + "'";
  uint32_t nd = 0;
  const size_t at_rank = c.pos();
  NEXUS_RETURN_IF_ERROR(c.read(&nd, "tensor rank"));
  if (nd == 0 || nd > kMaxDims)
    return c.fail_at(at_rank, what + " has rank " + std::to_string(nd) + " (1 to " +
                                  std::to_string(kMaxDims) + " supported)");
  std::vector<int64_t> dims(nd);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < nd; ++d) {
    uint64_t x = 0;
    const size_t at_dim = c.pos();
    NEXUS_RETURN_IF_ERROR(c.read(&x, "tensor dimension"));
    const std::string dim = what + " dimension " + std::to_string(d) + " = " + std::to_string(x);
    if (x == 0) return c.fail_at(at_dim, dim + " is zero");
    if (x > kMaxDim) return c.fail_at(at_dim, dim + " is out of range");
    if (numel > kMaxElements / x)
      return c.fail_at(at_dim, dim + " makes the element count overflow (more than " +
                                   std::to_string(kMaxElements) + " elements)");
    numel *= x;
    dims[nd - 1 - d] = static_cast<int64_t>(x);
  }
  uint32_t type = 0;
  const size_t at_type = c.pos();
  NEXUS_RETURN_IF_ERROR(c.read(&type, "tensor type"));
  const auto tr = dtype_traits(type);
  if (!tr) return c.fail_at(at_type, what + " has unknown type id " + std::to_string(type));
  ti->dtype = static_cast<DType>(type);
  if (dims.back() % tr->block_size != 0)
    return c.fail_at(at_type, what + " row of " + std::to_string(dims.back()) +
                                  " is not a multiple of the " + std::string(tr->name) +
                                  " block size " + std::to_string(tr->block_size));
  ti->nbytes = static_cast<size_t>(numel / tr->block_size) * tr->block_bytes;
  ti->shape = std::move(dims);
  const size_t at_offset = c.pos();
  NEXUS_RETURN_IF_ERROR(c.read(&ti->offset, "tensor offset"));
  if (ti->offset % alignment != 0)
    return c.fail_at(at_offset, what + " offset " + std::to_string(ti->offset) +
                                    " is not aligned to " + std::to_string(alignment));
  return Status::ok();
}

// Checks that every tensor's bytes lie inside the data section and that no two tensors overlap.
// `info_at[i]` is where tensor i's record starts (named in the error).
Status place_tensors(const Cursor& c, std::span<const uint8_t> bytes, size_t data_offset,
                     std::span<const size_t> info_at, std::vector<GgufTensorInfo>& tensors) {
  const size_t data_bytes = bytes.size() - data_offset;
  for (size_t i = 0; i < tensors.size(); ++i) {
    GgufTensorInfo& ti = tensors[i];
    if (ti.offset > data_bytes || ti.nbytes > data_bytes - ti.offset)
      return c.fail_at(info_at[i], "tensor '" + ti.name + "' data [" +
                                       std::to_string(data_offset + ti.offset) + ", +" +
                                       std::to_string(ti.nbytes) + ") runs past the end of the " +
                                       "file (" + std::to_string(bytes.size()) + " bytes)");
    ti.data = bytes.data() + data_offset + ti.offset;
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& prev = tensors[order[k - 1]];
    const GgufTensorInfo& cur = tensors[order[k]];
    if (prev.offset + prev.nbytes > cur.offset)
      return c.fail_at(info_at[order[k]], "tensor '" + cur.name + "' data at data offset " +
                                              std::to_string(cur.offset) + " overlaps tensor '" +
                                              prev.name + "' [" + std::to_string(prev.offset) +
                                              ", +" + std::to_string(prev.nbytes) + ")");
  }
  return Status::ok();
}

}  // namespace

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto mf = MappedFile::open(path);
  if (!mf) return mf.status();
  std::shared_ptr<MappedFile> m = std::move(mf).value();
  std::span<const uint8_t> bytes(m->data(), m->size());
  return parse(bytes, m, path);
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::shared_ptr<void> keepalive,
                                 const std::string& name) {
  GgufFile g;
  g.path_ = name;
  g.size_ = bytes.size();
  g.keepalive_ = std::move(keepalive);
  Cursor c(bytes, g.path_);

  uint32_t magic = 0;
  NEXUS_RETURN_IF_ERROR(c.read(&magic, "magic"));
  if (magic != kMagic) {
    if (magic == 0x47475546) return c.fail_at(0, "big-endian GGUF files are not supported");
    return c.fail_at(0, "bad magic (not a GGUF file)");
  }
  NEXUS_RETURN_IF_ERROR(c.read(&g.version_, "version"));
  if (g.version_ == 1) return c.fail_at(4, "GGUF version 1 is not supported (convert to v3)");
  if (g.version_ != 2 && g.version_ != 3)
    return c.fail_at(
        4, "unsupported GGUF version " + std::to_string(g.version_) + " (2 and 3 supported)");

  uint64_t n_tensors = 0, n_kv = 0;
  NEXUS_RETURN_IF_ERROR(c.read(&n_tensors, "tensor count"));
  NEXUS_RETURN_IF_ERROR(c.read(&n_kv, "metadata count"));
  // Each tensor info takes at least 8+4+8+4+8 bytes, each key/value at least 8+4+1, so these
  // bounds keep every reserve() below proportional to the file size.
  if (n_tensors > c.left() / 32)
    return c.fail_at(8, "tensor count " + std::to_string(n_tensors) + " is impossible for a " +
                            std::to_string(bytes.size()) + "-byte file (truncated or corrupt?)");
  if (n_kv > c.left() / 13)
    return c.fail_at(16, "metadata count " + std::to_string(n_kv) + " is impossible for a " +
                             std::to_string(bytes.size()) + "-byte file (truncated or corrupt?)");

  g.kv_.reserve(n_kv);
  size_t alignment_at = 0;
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    const size_t at = c.pos();
    NEXUS_RETURN_IF_ERROR(c.read_string(&key, "metadata key"));
    if (g.kv_index_.count(key)) return c.fail_at(at, "duplicate metadata key '" + key + "'");
    uint32_t t = 0;
    const size_t at_t = c.pos();
    NEXUS_RETURN_IF_ERROR(c.read(&t, "metadata value type"));
    if (!valid_type(t))
      return c.fail_at(at_t, "unknown value type " + std::to_string(t) + " for key '" + key + "'");
    if (key == "general.alignment") alignment_at = c.pos();
    GgufValue v;
    NEXUS_RETURN_IF_ERROR(read_value(c, static_cast<GgufType>(t), &v));
    g.kv_index_.emplace(key, g.kv_.size());
    g.kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = g.find("general.alignment")) {
    if (!is_int_type(a->type) || a->type == GgufType::kBool)
      return c.fail_at(alignment_at, "general.alignment has type " +
                                         std::string(gguf_type_name(a->type)) +
                                         ", expected an integer");
    if (a->i <= 0 || a->i > kMaxAlignment || (a->i & (a->i - 1)) != 0)
      return c.fail_at(alignment_at, "general.alignment " + std::to_string(a->i) +
                                         " is not a power of two between 1 and " +
                                         std::to_string(kMaxAlignment));
    g.alignment_ = static_cast<uint32_t>(a->i);
  }

  g.tensors_.reserve(n_tensors);
  std::vector<size_t> info_at;
  info_at.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo ti;
    const size_t at = c.pos();
    NEXUS_RETURN_IF_ERROR(read_tensor_info(c, g.alignment_, &ti));
    if (g.tensor_index_.count(ti.name))
      return c.fail_at(at, "duplicate tensor name '" + ti.name + "'");
    g.tensor_index_.emplace(ti.name, g.tensors_.size());
    g.tensors_.push_back(std::move(ti));
    info_at.push_back(at);
  }

  g.data_offset_ = (c.pos() + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (n_tensors > 0 && g.data_offset_ > bytes.size())
    return c.fail("data section starts at " + std::to_string(g.data_offset_) +
                  ", past the end of the file (" + std::to_string(bytes.size()) + " bytes)");
  if (n_tensors > 0)
    NEXUS_RETURN_IF_ERROR(place_tensors(c, bytes, g.data_offset_, info_at, g.tensors_));
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::kString) return std::nullopt;
  return v->s;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !is_int_type(v->type)) return std::nullopt;
  return v->i;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::kF32 || v->type == GgufType::kF64) return v->f;
  if (is_int_type(v->type)) return static_cast<double>(v->i);
  return std::nullopt;
}

const std::vector<std::string>* GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::kArray || v->array_type != GgufType::kString) return nullptr;
  return &v->as;
}

const std::vector<double>* GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::kArray ||
      (v->array_type != GgufType::kF32 && v->array_type != GgufType::kF64))
    return nullptr;
  return &v->af;
}

const std::vector<int64_t>* GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::kArray || !is_int_type(v->array_type)) return nullptr;
  return &v->ai;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const GgufTensorInfo& info) const {
  return Tensor(info.dtype, info.shape, const_cast<uint8_t*>(info.data), keepalive_);
}

}  // namespace nexus
