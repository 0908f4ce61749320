// Byte encoding of GGUF header pieces (little-endian scalars, strings, metadata key/values),
// shared by the in-memory GgufWriter and the streaming GgufStreamWriter.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nexus/io/gguf.h"

namespace nexus::gguf_encode {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t n = out.size();
  out.resize(n + sizeof(T));
  std::memcpy(out.data() + n, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s);
// One scalar of type `t` (integers and bools from `i`/`u`, floats from `f`).
void put_scalar(std::vector<uint8_t>& out, GgufType t, int64_t i, uint64_t u, double f);
// A metadata entry: key, value type, value (arrays with their element type and count).
void put_kv(std::vector<uint8_t>& out, const std::string& key, const GgufValue& v);

}  // namespace nexus::gguf_encode
