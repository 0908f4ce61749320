// The dequantizing matrix-vector product on CUDA for F32, F16, Q8_0, Q4_0 and Q4_K weights, the
// decode step's shape (a few tokens): a warp per weight row, each lane taking 32-element
// sub-blocks (one scale, and for Q4_K one min, each) in turn and dequantizing them in registers,
// the lanes' sums added by shuffles. The row is read once per token from memory or cache, so with
// one token the kernel streams the weights, which is what bounds decoding.
#include <cuda_fp16.h>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

constexpr int kWarps = kThreads / 32;

__device__ inline float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

// Sub-block j (32 elements) of a row: x . w over it.
template <DType kT>
__device__ inline float sub_block_dot(const uint8_t* row, int64_t j, const float* x) {
  float s = 0.0f;
  if constexpr (kT == DType::kF32) {
    const float* w = reinterpret_cast<const float*>(row) + j * 32;
    for (int l = 0; l < 32; ++l) s += w[l] * x[l];
  } else if constexpr (kT == DType::kF16) {
    const uint8_t* w = row + j * 64;
    for (int l = 0; l < 32; ++l) s += half_at(w + 2 * l) * x[l];
  } else if constexpr (kT == DType::kQ8_0) {  // d, then 32 int8 codes
    const uint8_t* b = row + j * 34;
    const auto* q = reinterpret_cast<const int8_t*>(b + 2);
    for (int l = 0; l < 32; ++l) s += static_cast<float>(q[l]) * x[l];
    s *= half_at(b);
  } else if constexpr (kT == DType::kQ4_0) {  // d, then 16 bytes: low nibbles 0-15, high 16-31
    const uint8_t* b = row + j * 18;
    for (int l = 0; l < 16; ++l) {
      s += static_cast<float>((b[2 + l] & 0xF) - 8) * x[l];
      s += static_cast<float>((b[2 + l] >> 4) - 8) * x[l + 16];
    }
    s *= half_at(b);
  } else {  // Q4_K: 256-element super-blocks of d, dmin, 12 bytes of 6-bit scales/mins, codes
    const uint8_t* b = row + (j / 8) * 144;
    const int sb = static_cast<int>(j % 8);
    const uint8_t* sc = b + 4;
    int scale, min;
    if (sb < 4) {
      scale = sc[sb] & 63;
      min = sc[sb + 4] & 63;
    } else {
      scale = (sc[sb + 4] & 0xF) | ((sc[sb - 4] >> 6) << 4);
      min = (sc[sb + 4] >> 4) | ((sc[sb] >> 6) << 4);
    }
    // sub-blocks 2c and 2c + 1 share the 32 bytes of chunk c: low nibbles, then high ones
    const uint8_t* q = b + 16 + 32 * (sb / 2);
    const int shift = (sb % 2) * 4;
    float xs = 0.0f;
    for (int l = 0; l < 32; ++l) {
      s += static_cast<float>((q[l] >> shift) & 0xF) * x[l];
      xs += x[l];
    }
    s = half_at(b) * static_cast<float>(scale) * s - half_at(b + 2) * static_cast<float>(min) * xs;
  }
  return s;
}

template <DType kT>
__global__ void matvec_rows(const uint8_t* w, size_t stride, int64_t rows, int64_t k,
                            const float* x, int64_t n, float* y) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  const uint8_t* row = w + r * stride;
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * k;
    float s = 0.0f;
    for (int64_t j = lane; j < k / 32; j += 32) s += sub_block_dot<kT>(row, j, xt + j * 32);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) y[t * rows + r] = s;
  }
}

template <DType kT>
void launch(const MatvecArgs& a) {
  const auto blocks = static_cast<unsigned>((a.rows + kWarps - 1) / kWarps);
  matvec_rows<kT><<<blocks, kThreads>>>(static_cast<const uint8_t*>(a.w), row_bytes(a.dtype, a.k),
                                        a.rows, a.k, a.x, a.n, a.y);
}

void matvec(const MatvecArgs& a, ThreadPool*) {
  if (a.rows == 0 || a.n == 0) return;
  switch (a.dtype) {
    case DType::kF32:
      launch<DType::kF32>(a);
      break;
    case DType::kF16:
      launch<DType::kF16>(a);
      break;
    case DType::kQ8_0:
      launch<DType::kQ8_0>(a);
      break;
    case DType::kQ4_0:
      launch<DType::kQ4_0>(a);
      break;
    default:
      launch<DType::kQ4_K>(a);
      break;
  }
  finish("matvec");
}

// k in whole blocks of the type (32 elements; 256 for Q4_K).
bool takes(const MatvecArgs& a) {
  const int64_t block = a.dtype == DType::kQ4_K ? 256 : 32;
  const bool type = a.dtype == DType::kF32 || a.dtype == DType::kF16 || a.dtype == DType::kQ8_0 ||
                    a.dtype == DType::kQ4_0 || a.dtype == DType::kQ4_K;
  return type && a.k % block == 0;
}

const KernelVariant<MatvecArgs> kMatvec[] = {{"cuda", device_present, matvec, takes}};

}  // namespace

KernelVariants<MatvecArgs> matvec_kernels() { return kMatvec; }

}  // namespace nexus::cuda
