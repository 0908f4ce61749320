// LayerPass's helpers: parameter lookup through the architecture's slot table, and the rounding
// and clearing every layer type's passes share.
#include "models/layer.h"

#include "models/hybrid_layer.h"
#include "models/ssm_layer.h"
#include "models/transformer_layer.h"
#include "ops/elementwise.h"
#include "ops/round.h"

namespace nexus {
namespace {

template <class P>
P lookup(const std::vector<LayerSlot>& slots, P const* ptrs, Tensor LayerWeights::*field) {
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].field == field) return ptrs[i];
  return nullptr;
}

}  // namespace

const float* LayerPass::weight(Tensor LayerWeights::*field) const {
  return lookup<const float*>(*slots, w, field);
}

float* LayerPass::grad(Tensor LayerWeights::*field) const { return lookup<float*>(*slots, g, field); }

void LayerPass::keep(int slot, int64_t count) const {
  if (precision == Precision::kF32) return;
  if (h != nullptr && h[slot] != nullptr)
    round_pack(precision, a[slot], h[slot], count, pool);
  else
    round_to(precision, a[slot], count, pool);
}

void LayerPass::keep_only(float* x, int64_t count) const {
  if (precision != Precision::kF32) round_to(precision, x, count, pool);
}

void LayerPass::round_grad(float* x, int64_t count) const {
  if (precision != Precision::kF32) round_to(precision, x, count, pool);
}

void LayerPass::zero(float* p, int64_t count) const { fill_zero(p, count, pool); }

const LayerType& layer_type(const ModelConfig& c, int64_t l) {
  if (c.hybrid()) return hybrid_layer();
  return c.recurrent_layer(l) ? ssm_layer() : transformer_layer();
}

}  // namespace nexus
