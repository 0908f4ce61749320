// The block of a hybrid (granitehybrid): attention or Mamba-2 by layer, both followed by the
// feed-forward. One layer type for every layer, so the trainer lays out one kind of block.
#pragma once

#include "models/layer.h"

namespace nexus {

const LayerType& hybrid_layer();

}  // namespace nexus
