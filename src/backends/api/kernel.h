// What every backend registers for an op: its kernel variants, fastest first. A variant has a name
// ("avx2", "scalar"), a check that this machine can run it, and the function, which takes the op's
// argument struct (backends/api/<family>.h) and an optional thread pool. The op front-ends
// (src/ops/) run the first available variant of the tensor's device; the op test runs every one
// against the list's last, the scalar reference.
#pragma once

#include <span>

#include "nexus/core/thread_pool.h"
#include "nexus/status.h"

namespace nexus {

template <class Args>
struct KernelVariant {
  const char* name;
  bool (*available)();
  // With a pool the work is split over its threads; results are the same for any thread count.
  void (*run)(const Args& args, ThreadPool* pool);
  // Whether the variant takes these arguments (a head size, a window); null: any.
  bool (*supports)(const Args& args) = nullptr;
  bool runs(const Args& args) const { return available() && (!supports || supports(args)); }
};

template <class Args>
using KernelVariants = std::span<const KernelVariant<Args>>;

// The first variant of `v` this machine runs on `args`; throws nexus::Error naming `op` when there
// is none.
template <class Args>
const KernelVariant<Args>& best_kernel(KernelVariants<Args> v, const char* op, const Args& args) {
  for (const KernelVariant<Args>& k : v)
    if (k.runs(args)) return k;
  throw Error(std::string("[") + op + "] no kernel this machine can run");
}

inline bool always_available() { return true; }

}  // namespace nexus
