// The selective state-space block of mamba and mamba2 (RMSNorm, then the Mamba mixer, added to
// the residual stream): its inference forward over each sequence's recurrent state.
#pragma once

#include "models/layer.h"

namespace nexus {

const LayerType& ssm_layer();

}  // namespace nexus
