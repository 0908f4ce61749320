// Mixed precision's rounding on CUDA: f32 to bf16 or fp16 (round to nearest even; fp16 overflows
// to inf), as values or 16-bit encodings, and back, the CPU's bits (half.cuh).
#include "backends/cuda/half.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

// One grid-stride loop for the three ops: y = value(encode(x)) when y is set, h = encode(x) (and
// x rounded in place) when h is set, x = decode(h) when unpacking.
template <int kOp>  // 0 round, 1 round and pack, 2 unpack
__global__ void round_elements(Precision p, const float* x, float* y, uint16_t* h,
                               const uint16_t* hin, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (kOp == 2) {
      y[i] = decode_16(hin[i], p);
    } else {
      const uint16_t e = encode_16(x[i], p);
      if constexpr (kOp == 1) h[i] = e;
      y[i] = decode_16(e, p);
    }
  }
}

void round_copy(const RoundArgs& a, ThreadPool*) {
  round_elements<0><<<blocks_for(a.n), kThreads>>>(a.p, a.x, a.y, nullptr, nullptr, a.n);
  finish("round");
}

void round_pack(const RoundPackArgs& a, ThreadPool*) {
  round_elements<1><<<blocks_for(a.n), kThreads>>>(a.p, a.x, a.x, a.h, nullptr, a.n);
  finish("round_pack");
}

void unpack(const UnpackArgs& a, ThreadPool*) {
  round_elements<2><<<blocks_for(a.n), kThreads>>>(a.p, nullptr, a.x, nullptr, a.h, a.n);
  finish("unpack");
}

const KernelVariant<RoundArgs> kRound[] = {{"cuda", device_present, round_copy}};
const KernelVariant<RoundPackArgs> kRoundPack[] = {{"cuda", device_present, round_pack}};
const KernelVariant<UnpackArgs> kUnpack[] = {{"cuda", device_present, unpack}};

}  // namespace

KernelVariants<RoundArgs> round_kernels() { return kRound; }
KernelVariants<RoundPackArgs> round_pack_kernels() { return kRoundPack; }
KernelVariants<UnpackArgs> unpack_kernels() { return kUnpack; }

}  // namespace nexus::cuda
