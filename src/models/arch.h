// Architecture registry: each architecture file describes how to read its hyper-parameters and
// where its tensors live (one name table per architecture); its blocks' math is their layer
// type's (models/layer.h).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nexus/io/gguf.h"
#include "nexus/model.h"

namespace nexus {

// Which layers of a hybrid have a tensor: all of them, or only its attention or state-space ones.
enum class LayerKind : uint8_t { kAll, kAttention, kRecurrent };

// One tensor of a block: the member it fills, its GGUF name with "%d" for the layer,
// its expected shape (built from the config), whether the file must have it, and which layers do.
struct LayerSlot {
  Tensor LayerWeights::*field;
  const char* name;
  std::vector<int64_t> shape;
  bool required;
  LayerKind kind = LayerKind::kAll;
  // Set where the shape differs by layer: layer l's shape, in place of `shape`.
  std::function<std::vector<int64_t>(int64_t)> shape_at = nullptr;
  std::vector<int64_t> shape_of(int64_t l) const { return shape_at ? shape_at(l) : shape; }
};

// Whether layer l of c has the slot's tensor.
bool slot_in_layer(const LayerSlot& s, const ModelConfig& c, int64_t l);

// A tensor outside the blocks: the member of ModelWeights it fills, its GGUF name, its shape,
// whether the file must have it, and whether it follows the blocks (the output head) rather than
// precedes them (the embeddings).
struct ModelSlot {
  Tensor ModelWeights::*field;
  const char* name;
  std::vector<int64_t> shape;
  bool required;
  bool after_blocks;
};

// GGUF metadata as (key, value) pairs, in the order they are written.
using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// An architecture: the one place its GGUF tensor names and metadata keys are spelled. Loading,
// the trainer's parameter layout and its export all read them from here.
struct ArchSpec {
  std::string_view name;
  Arch arch;
  // Fills the arch-specific parts of `cfg` (common keys are read by the loader).
  Status (*read_config)(const GgufFile& f, ModelConfig* cfg);
  // The per-layer tensor table for a config.
  std::vector<LayerSlot> (*layer_slots)(const ModelConfig& cfg);
  // The tensors outside the blocks (embeddings, final norm, untied output) for a config.
  std::vector<ModelSlot> (*model_slots)(const ModelConfig& cfg);
  // Appends the arch-specific metadata of `cfg` (what read_config reads back).
  void (*write_config)(const ModelConfig& cfg, Metadata* out);
  // Every block is a recurrent state-space layer: no attention keys, no KV cache.
  bool recurrent = false;
};

// The spec for a GGUF `general.architecture` value, or nullptr when unsupported.
const ArchSpec* find_arch(std::string_view name);
// The spec of an architecture (every Arch has one).
const ArchSpec& arch_spec(Arch arch);
// The metadata that describes `cfg`: general.architecture, the hyper-parameters the loader reads
// for every architecture, then the architecture's own (ArchSpec::write_config).
Metadata config_metadata(const ModelConfig& cfg);
// Block `layer`'s name for a LayerSlot name pattern ("blk.%d.attn_q.weight").
std::string layer_tensor_name(const char* pattern, int64_t layer);
// The tables every llama-family architecture shares outside the blocks; gpt2 has its own.
std::vector<ModelSlot> llama_model_slots(const ModelConfig& cfg);
void llama_write_config(const ModelConfig& cfg, Metadata* out);
// Comma-separated list of supported architecture names (for error messages).
std::string supported_archs();

// Specs defined in the per-architecture files.
const ArchSpec& llama_spec();
const ArchSpec& qwen2_spec();
const ArchSpec& qwen3_spec();
const ArchSpec& gpt2_spec();
const ArchSpec& mamba_spec();
const ArchSpec& mamba2_spec();
const ArchSpec& granite_hybrid_spec();
const ArchSpec& ltm_spec();

// The state-space keys (ssm.*) every architecture with Mamba layers reads and writes, and
// Mamba-2's block tensors (without the block's input norm).
Status read_ssm_keys(const GgufFile& f, ModelConfig* c);
void write_ssm_keys(const ModelConfig& c, Metadata* out);
std::vector<LayerSlot> mamba2_mixer_slots(const ModelConfig& c);

}  // namespace nexus
