// The CUDA backend's kernel tables, one per op it has (ops/<family>.h lists them as the op's
// `cuda()` table). A build without nvcc gets empty tables from stub.cc. The variants run on the
// default stream and return once the result is there.
#pragma once

#include "backends/api/activation.h"
#include "backends/api/attention.h"
#include "backends/api/dense.h"
#include "backends/api/embedding.h"
#include "backends/api/kernel.h"
#include "backends/api/loss.h"
#include "backends/api/matvec.h"
#include "backends/api/norm.h"
#include "backends/api/optim.h"
#include "backends/api/rope.h"
#include "backends/api/round.h"

namespace nexus::cuda {

KernelVariants<RmsNormArgs> rms_norm_kernels();
KernelVariants<RmsNormBackwardArgs> rms_norm_backward_kernels();
KernelVariants<LayerNormArgs> layer_norm_kernels();
KernelVariants<LayerNormBackwardArgs> layer_norm_backward_kernels();
KernelVariants<SwigluArgs> swiglu_kernels();
KernelVariants<SwigluBackwardArgs> swiglu_backward_kernels();
KernelVariants<GeluArgs> gelu_kernels();
KernelVariants<GeluBackwardArgs> gelu_backward_kernels();
KernelVariants<RopeArgs> rope_kernels();
KernelVariants<DenseArgs> dense_kernels();
KernelVariants<DenseBackwardArgs> dense_backward_kernels();
KernelVariants<EmbeddingArgs> embedding_kernels();
KernelVariants<EmbeddingBackwardArgs> embedding_backward_kernels();
KernelVariants<CrossEntropyArgs> cross_entropy_kernels();
KernelVariants<AdamWArgs> adamw_kernels();
KernelVariants<SumSquaresArgs> sum_squares_kernels();
KernelVariants<ScaleArgs> scale_kernels();
KernelVariants<MatvecArgs> matvec_kernels();
KernelVariants<RoundArgs> round_kernels();
KernelVariants<RoundPackArgs> round_pack_kernels();
KernelVariants<UnpackArgs> unpack_kernels();
KernelVariants<CausalAttentionArgs> causal_attention_kernels();
KernelVariants<CausalAttentionBackwardArgs> causal_attention_backward_kernels();

}  // namespace nexus::cuda
