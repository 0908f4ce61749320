// TrainModel's mixed-precision pieces: rounded weight copies per block, rounding of activations
// and of activation gradients, and restoring a block's activations into the working set before
// its backward (its layer type recomputes the cheap ones).
#include "nexus/core/thread_pool.h"
#include "nexus/train/train_model.h"
#include "ops/round.h"

namespace nexus::train {

const float* const* TrainModel::layer_weights(int64_t l) {
  const std::vector<float*>& m = pw_[l];
  if (!half()) return m.data();
  const auto [begin, end] = layer_range_[l];
  if (wcopy_layer_id_ != l) {
    round_copy(opts_.precision, params_ + begin, wcopy_layer_, static_cast<int64_t>(end - begin),
               pool_.get());
    wcopy_layer_id_ = l;
  }
  // The same tensor at the same place inside the block's range of the copy.
  wview_.resize(m.size());
  for (size_t i = 0; i < m.size(); ++i)
    wview_[i] = m[i] ? wcopy_layer_ + (m[i] - (params_ + begin)) : nullptr;
  return wview_.data();
}

void TrainModel::keep(float* x, int64_t count) {
  if (half()) round_to(opts_.precision, x, count, pool_.get());
}

void TrainModel::round_grad(float* x, int64_t count) {
  if (half()) round_to(opts_.precision, x, count, pool_.get());
}

void TrainModel::restore_block(int64_t l, const LayerPass& pass) {
  if (!half_.empty()) {
    const std::vector<SavedSlot> saved = layers_[l]->saved(cfg_, cur_b_, cur_t_);
    const std::vector<uint16_t*>& h = half_[l];
    for (size_t i = 0; i < saved.size(); ++i)
      if (h[i]) unpack(opts_.precision, h[i], pass.a[i], saved[i].count, pool_.get());
  }
  layers_[l]->recompute(pass, opts_.selective_recompute);
}

}  // namespace nexus::train
