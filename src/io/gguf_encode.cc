// GGUF header encoding shared by the writers (see gguf_encode.h).
#include "io/gguf_encode.h"

namespace nexus::gguf_encode {

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// One scalar of type `t` (integers and bools from `i`/`u`, floats from `f`).
void put_scalar(std::vector<uint8_t>& out, GgufType t, int64_t i, uint64_t u, double f) {
  switch (t) {
    case GgufType::kU8:
      put<uint8_t>(out, static_cast<uint8_t>(i));
      break;
    case GgufType::kI8:
      put<int8_t>(out, static_cast<int8_t>(i));
      break;
    case GgufType::kU16:
      put<uint16_t>(out, static_cast<uint16_t>(i));
      break;
    case GgufType::kI16:
      put<int16_t>(out, static_cast<int16_t>(i));
      break;
    case GgufType::kU32:
      put<uint32_t>(out, static_cast<uint32_t>(i));
      break;
    case GgufType::kI32:
      put<int32_t>(out, static_cast<int32_t>(i));
      break;
    case GgufType::kU64:
      put<uint64_t>(out, u ? u : static_cast<uint64_t>(i));
      break;
    case GgufType::kI64:
      put<int64_t>(out, i);
      break;
    case GgufType::kF32:
      put<float>(out, static_cast<float>(f));
      break;
    case GgufType::kF64:
      put<double>(out, f);
      break;
    case GgufType::kBool:
      put<uint8_t>(out, i ? 1 : 0);
      break;
    default:
      throw Error("[gguf writer] not a scalar type");
  }
}

void put_kv(std::vector<uint8_t>& out, const std::string& key, const GgufValue& v) {
  put_string(out, key);
  put<uint32_t>(out, static_cast<uint32_t>(v.type));
  if (v.type == GgufType::kString) {
    put_string(out, v.s);
  } else if (v.type == GgufType::kArray) {
    put<uint32_t>(out, static_cast<uint32_t>(v.array_type));
    put<uint64_t>(out, v.array_size());
    for (const auto& s : v.as) put_string(out, s);
    for (double f : v.af) put_scalar(out, v.array_type, 0, 0, f);
    for (int64_t i : v.ai) put_scalar(out, v.array_type, i, 0, 0);
  } else {
    put_scalar(out, v.type, v.i, v.u, v.f);
  }
}

}  // namespace nexus::gguf_encode
