// The CUDA backend of a build without nvcc: every request for a CUDA device gets this answer.
#include "backends/cuda/cuda.h"
#include "backends/cuda/kernels.h"

namespace nexus::cuda {

bool built() { return false; }

Status init() {
  return Status::error(
      "nexus was built without CUDA (no nvcc was found when the build was configured)");
}

KernelVariants<RmsNormArgs> rms_norm_kernels() { return {}; }
KernelVariants<RmsNormBackwardArgs> rms_norm_backward_kernels() { return {}; }
KernelVariants<LayerNormArgs> layer_norm_kernels() { return {}; }
KernelVariants<LayerNormBackwardArgs> layer_norm_backward_kernels() { return {}; }
KernelVariants<SwigluArgs> swiglu_kernels() { return {}; }
KernelVariants<SwigluBackwardArgs> swiglu_backward_kernels() { return {}; }
KernelVariants<GeluArgs> gelu_kernels() { return {}; }
KernelVariants<GeluBackwardArgs> gelu_backward_kernels() { return {}; }
KernelVariants<RopeArgs> rope_kernels() { return {}; }
KernelVariants<DenseArgs> dense_kernels() { return {}; }
KernelVariants<DenseBackwardArgs> dense_backward_kernels() { return {}; }
KernelVariants<EmbeddingArgs> embedding_kernels() { return {}; }
KernelVariants<EmbeddingBackwardArgs> embedding_backward_kernels() { return {}; }
KernelVariants<CrossEntropyArgs> cross_entropy_kernels() { return {}; }
KernelVariants<AdamWArgs> adamw_kernels() { return {}; }
KernelVariants<SumSquaresArgs> sum_squares_kernels() { return {}; }
KernelVariants<ScaleArgs> scale_kernels() { return {}; }
KernelVariants<MatvecArgs> matvec_kernels() { return {}; }
KernelVariants<RoundArgs> round_kernels() { return {}; }
KernelVariants<RoundPackArgs> round_pack_kernels() { return {}; }
KernelVariants<UnpackArgs> unpack_kernels() { return {}; }
KernelVariants<CausalAttentionArgs> causal_attention_kernels() { return {}; }
KernelVariants<CausalAttentionBackwardArgs> causal_attention_backward_kernels() { return {}; }

Status blas_status() { return init(); }

}  // namespace nexus::cuda
