// 2:4 sparse weights: the layout's scalar reference kernels and the load-time check and
// compression of dense rows (layout in sparse24.h).
#include "backends/cpu/sparse24.h"

#include <cmath>
#include <cstring>

namespace nexus::cpu {
namespace {

// The base type's value and bit pattern, one template per element type.
struct F32Elem {
  using T = float;
  static float value(T v) { return v; }
  static T from(float f) { return f; }
  static bool nonzero(T v) { return v != 0.0f; }
};
struct F16Elem {
  using T = uint16_t;
  static float value(T v) { return f16_to_f32(v); }
  static T from(float f) { return f32_to_f16(f); }
  static bool nonzero(T v) { return (v & 0x7fffu) != 0; }
};
struct BF16Elem {
  using T = uint16_t;
  static float value(T v) { return bf16_to_f32(v); }
  static T from(float f) { return f32_to_bf16(f); }
  static bool nonzero(T v) { return (v & 0x7fffu) != 0; }
};

template <class E>
constexpr size_t block_bytes() {
  return 4 + 16 * sizeof(typename E::T);
}

// Positions and values of one block, unpacked.
template <class E>
void read_block(const uint8_t* b, uint32_t* pos, typename E::T* v) {
  std::memcpy(pos, b, 4);
  std::memcpy(v, b + 4, 16 * sizeof(typename E::T));
}

template <class E>
void write_block(uint8_t* b, uint32_t pos, const typename E::T* v) {
  std::memcpy(b, &pos, 4);
  std::memcpy(b + 4, v, 16 * sizeof(typename E::T));
}

// The two kept columns of a group (ascending) from a mask of its nonzeros (at most two set): the
// nonzeros, then the lowest free columns.
void kept_of(unsigned mask, int* a, int* b) {
  int c[2], n = 0;
  for (int i = 0; i < 4 && n < 2; ++i)
    if (mask & (1u << i)) c[n++] = i;
  for (int i = 0; i < 4 && n < 2; ++i)
    if (!(mask & (1u << i))) c[n++] = i;
  *a = c[0] < c[1] ? c[0] : c[1];
  *b = c[0] < c[1] ? c[1] : c[0];
}

template <class E>
void quantize(const float* x, void* y, int64_t n) {
  auto* out = static_cast<uint8_t*>(y);
  for (int64_t b = 0; b < n / kSparse24Block; ++b, out += block_bytes<E>()) {
    const float* xb = x + b * kSparse24Block;
    uint32_t pos = 0;
    typename E::T v[16];
    for (int g = 0; g < 8; ++g) {
      const float* xg = xb + 4 * g;
      // The two largest |x| (the first on ties), as a mask.
      int first = 0;
      for (int i = 1; i < 4; ++i)
        if (std::fabs(xg[i]) > std::fabs(xg[first])) first = i;
      int second = first == 0 ? 1 : 0;
      for (int i = 0; i < 4; ++i)
        if (i != first && std::fabs(xg[i]) > std::fabs(xg[second])) second = i;
      int a, c;
      kept_of((1u << first) | (1u << second), &a, &c);
      pos |= static_cast<uint32_t>(a) << (4 * g);
      pos |= static_cast<uint32_t>(c) << (4 * g + 2);
      v[2 * g] = E::from(xg[a]);
      v[2 * g + 1] = E::from(xg[c]);
    }
    write_block<E>(out, pos, v);
  }
}

template <class E>
void dequantize(const void* x, float* y, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(x);
  for (int64_t b = 0; b < n / kSparse24Block; ++b, in += block_bytes<E>()) {
    uint32_t pos;
    typename E::T v[16];
    read_block<E>(in, &pos, v);
    float* yb = y + b * kSparse24Block;
    std::memset(yb, 0, kSparse24Block * sizeof(float));
    for (int j = 0; j < 16; ++j) yb[4 * (j / 2) + ((pos >> (2 * j)) & 3)] = E::value(v[j]);
  }
}

template <class E>
float vec_dot(int64_t n, const void* w, const void* x) {
  const auto* in = static_cast<const uint8_t*>(w);
  const auto* xf = static_cast<const float*>(x);
  double s = 0.0;
  for (int64_t b = 0; b < n / kSparse24Block; ++b, in += block_bytes<E>()) {
    uint32_t pos;
    typename E::T v[16];
    read_block<E>(in, &pos, v);
    const float* xb = xf + b * kSparse24Block;
    for (int j = 0; j < 16; ++j)
      s += double(E::value(v[j])) * xb[4 * (j / 2) + ((pos >> (2 * j)) & 3)];
  }
  return static_cast<float>(s);
}

template <class E>
bool all_2of4(const uint8_t* w, size_t stride, int64_t rows, int64_t k) {
  for (int64_t r = 0; r < rows; ++r) {
    const auto* row = reinterpret_cast<const typename E::T*>(w + static_cast<size_t>(r) * stride);
    for (int64_t g = 0; g < k; g += 4) {
      typename E::T v[4];
      std::memcpy(v, row + g, sizeof v);
      if (E::nonzero(v[0]) + E::nonzero(v[1]) + E::nonzero(v[2]) + E::nonzero(v[3]) > 2)
        return false;
    }
  }
  return true;
}

template <class E>
void compress(const uint8_t* w, size_t stride, int64_t rows, int64_t k, uint8_t* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const auto* row = reinterpret_cast<const typename E::T*>(w + static_cast<size_t>(r) * stride);
    for (int64_t b = 0; b < k / kSparse24Block; ++b, dst += block_bytes<E>()) {
      uint32_t pos = 0;
      typename E::T v[16];
      for (int g = 0; g < 8; ++g) {
        typename E::T q[4];
        std::memcpy(q, row + b * kSparse24Block + 4 * g, sizeof q);
        unsigned mask = 0;
        for (int i = 0; i < 4; ++i) mask |= E::nonzero(q[i]) ? 1u << i : 0u;
        int a, c;
        kept_of(mask, &a, &c);
        pos |= static_cast<uint32_t>(a) << (4 * g);
        pos |= static_cast<uint32_t>(c) << (4 * g + 2);
        v[2 * g] = q[a];
        v[2 * g + 1] = q[c];
      }
      write_block<E>(dst, pos, v);
    }
  }
}

template <class E>
void expand(const uint8_t* src, size_t src_stride, int64_t rows, int64_t k, uint8_t* dst) {
  using T = typename E::T;
  auto* out = reinterpret_cast<T*>(dst);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* b = src + static_cast<size_t>(r) * src_stride;
    for (int64_t c = 0; c < k; c += kSparse24Block, b += block_bytes<E>(), out += kSparse24Block) {
      uint32_t pos;
      T v[16];
      read_block<E>(b, &pos, v);
      std::memset(out, 0, kSparse24Block * sizeof(T));
      for (int j = 0; j < 16; ++j) out[4 * (j / 2) + ((pos >> (2 * j)) & 3)] = v[j];
    }
  }
}

}  // namespace

void expand_2of4(DType t, const uint8_t* src, size_t src_stride, int64_t rows, int64_t k,
                 uint8_t* dst) {
  switch (t) {
    case DType::kF32_2of4: return expand<F32Elem>(src, src_stride, rows, k, dst);
    case DType::kF16_2of4: return expand<F16Elem>(src, src_stride, rows, k, dst);
    case DType::kBF16_2of4: return expand<BF16Elem>(src, src_stride, rows, k, dst);
    default: return;
  }
}

bool is_sparse24(DType t) {
  return t == DType::kF32_2of4 || t == DType::kF16_2of4 || t == DType::kBF16_2of4;
}

DType sparse24_base(DType t) {
  switch (t) {
    case DType::kF32_2of4:
      return DType::kF32;
    case DType::kF16_2of4:
      return DType::kF16;
    case DType::kBF16_2of4:
      return DType::kBF16;
    default:
      return t;
  }
}

bool sparse24_of(DType base, DType* out) {
  switch (base) {
    case DType::kF32:
      *out = DType::kF32_2of4;
      return true;
    case DType::kF16:
      *out = DType::kF16_2of4;
      return true;
    case DType::kBF16:
      *out = DType::kBF16_2of4;
      return true;
    default:
      return false;
  }
}

bool rows_are_2of4(DType base, const uint8_t* w, size_t stride, int64_t rows, int64_t k) {
  if (k % kSparse24Block != 0) return false;
  switch (base) {
    case DType::kF32:
      return all_2of4<F32Elem>(w, stride, rows, k);
    case DType::kF16:
      return all_2of4<F16Elem>(w, stride, rows, k);
    case DType::kBF16:
      return all_2of4<BF16Elem>(w, stride, rows, k);
    default:
      return false;
  }
}

void compress_2of4(DType base, const uint8_t* w, size_t stride, int64_t rows, int64_t k,
                   uint8_t* dst) {
  switch (base) {
    case DType::kF32:
      return compress<F32Elem>(w, stride, rows, k, dst);
    case DType::kF16:
      return compress<F16Elem>(w, stride, rows, k, dst);
    case DType::kBF16:
      return compress<BF16Elem>(w, stride, rows, k, dst);
    default:
      return;
  }
}

void quantize_f32_2of4_ref(const float* x, void* y, int64_t n) { quantize<F32Elem>(x, y, n); }
void quantize_f16_2of4_ref(const float* x, void* y, int64_t n) { quantize<F16Elem>(x, y, n); }
void quantize_bf16_2of4_ref(const float* x, void* y, int64_t n) { quantize<BF16Elem>(x, y, n); }
void dequantize_f32_2of4_ref(const void* x, float* y, int64_t n) { dequantize<F32Elem>(x, y, n); }
void dequantize_f16_2of4_ref(const void* x, float* y, int64_t n) { dequantize<F16Elem>(x, y, n); }
void dequantize_bf16_2of4_ref(const void* x, float* y, int64_t n) { dequantize<BF16Elem>(x, y, n); }
float vec_dot_f32_2of4_ref(int64_t n, const void* w, const void* x) {
  return vec_dot<F32Elem>(n, w, x);
}
float vec_dot_f16_2of4_ref(int64_t n, const void* w, const void* x) {
  return vec_dot<F16Elem>(n, w, x);
}
float vec_dot_bf16_2of4_ref(int64_t n, const void* w, const void* x) {
  return vec_dot<BF16Elem>(n, w, x);
}

}  // namespace nexus::cpu
