// The Llama-family tensor table (RMSNorm, GQA attention, SwiGLU), shared by llama, qwen2, qwen3.
#pragma once

#include "models/arch.h"

namespace nexus {

// The Llama tensor table; qwen adds its extras on top.
std::vector<LayerSlot> llama_layer_slots(const ModelConfig& c);

}  // namespace nexus
