// Architecture registry: each architecture file describes how to read its hyper-parameters, where
// its tensors live (one name table per architecture) and how to run its forward pass.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "nexus/model.h"

namespace nexus {

struct ForwardState;

// One tensor of a transformer block: the member it fills, its GGUF name with "%d" for the layer,
// its expected shape (built from the config) and whether the file must have it.
struct LayerSlot {
  Tensor LayerWeights::*field;
  const char* name;
  std::vector<int64_t> shape;
  bool required;
};

struct ArchSpec {
  std::string_view name;
  Arch arch;
  // Fills the arch-specific parts of `cfg` (common keys are read by the loader).
  Status (*read_config)(const GgufFile& f, ModelConfig* cfg);
  // The per-layer tensor table for a config.
  std::vector<LayerSlot> (*layer_slots)(const ModelConfig& cfg);
  // Runs all blocks and the output head for the tokens in `st` (see models/forward.h).
  void (*forward)(const Model& model, ForwardState& st);
};

// The spec for a GGUF `general.architecture` value, or nullptr when unsupported.
const ArchSpec* find_arch(std::string_view name);
// Comma-separated list of supported architecture names (for error messages).
std::string supported_archs();

// Specs defined in the per-architecture files.
const ArchSpec& llama_spec();
const ArchSpec& qwen2_spec();
const ArchSpec& qwen3_spec();
const ArchSpec& gpt2_spec();

}  // namespace nexus
