// The model-parallel cut and gather of optimizer state (tensor_parallel.cc, pipeline_parallel.cc)
// copy element-wise f32 buffers laid out as the parameters.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nexus/status.h"
#include "nexus/train/optimizer.h"

namespace nexus::dist {

// OK when `a` and `b` hold the same buffers, each f32 and of a_floats and b_floats values; the
// error names `mode` ("tensor parallel") and the buffer.
inline Status check_elementwise_state(const std::vector<train::StateBuffer>& a,
                                      const std::vector<train::StateBuffer>& b, size_t a_floats,
                                      size_t b_floats, const std::string& mode) {
  if (a.size() != b.size())
    return Status::error("[" + mode + "] the optimizers are not of one kind");
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != DType::kF32 || b[i].dtype() != DType::kF32 || a[i].count() != a_floats ||
        b[i].count() != b_floats)
      return Status::error(mode +
                           " checkpoints need element-wise f32 optimizer state (AdamW "
                           "with f32 state, SGD); '" +
                           a[i].name + "' is not");
  return Status::ok();
}

}  // namespace nexus::dist
