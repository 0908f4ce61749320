// The optimizer state's cut and gather, the same for every model-parallel split.
#include "nexus/dist/model_parallel.h"

#include <string>
#include <vector>

namespace nexus::dist {
namespace {

// OK when `a` and `b` hold the same buffers, each f32 and of a_floats and b_floats values.
Status check(const std::vector<train::StateBuffer>& a, const std::vector<train::StateBuffer>& b,
             size_t a_floats, size_t b_floats, const std::string& mode) {
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

}  // namespace

Status ModelParallel::cut_state(train::Optimizer& full, train::Optimizer& part) const {
  std::vector<train::StateBuffer> f = full.state(), s = part.state();
  NEXUS_RETURN_IF_ERROR(check(f, s, full_floats(), part_floats(), kind()));
  for (size_t i = 0; i < f.size(); ++i) cut(f[i].data, s[i].data);
  part.set_steps(full.steps());
  return Status::ok();
}

Status ModelParallel::gather_state(train::Optimizer& part, train::Optimizer* full) {
  std::vector<train::StateBuffer> s = part.state();
  // Every rank checks its own side (the same kinds everywhere), so all of them go on or none.
  std::vector<train::StateBuffer> f = full ? full->state() : s;
  NEXUS_RETURN_IF_ERROR(check(f, s, full ? full_floats() : part_floats(), part_floats(), kind()));
  for (size_t i = 0; i < s.size(); ++i) gather(s[i].data, full ? f[i].data : std::span<float>());
  if (full) full->set_steps(part.steps());
  return Status::ok();
}

}  // namespace nexus::dist
