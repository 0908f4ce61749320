// The Llama-family block (RMSNorm, RoPE, GQA attention, SwiGLU), shared by llama, qwen2, qwen3.
#pragma once

#include "models/arch.h"
#include "models/forward.h"

namespace nexus {

// Runs every block and the output head; optional tensors (q/k/v biases, q/k norms) are applied
// when the model has them.
void llama_forward(const Model& model, ForwardState& st);
// The Llama tensor table; qwen adds its extras on top.
std::vector<LayerSlot> llama_layer_slots(const ModelConfig& c);

}  // namespace nexus
