// SsmState: one counted allocation (profiled as KV cache: it is the cache of a recurrent model).
#include "backends/cpu/ssm_state.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "nexus/core/allocator.h"
#include "nexus/status.h"
#include "profile/memory.h"

namespace nexus {

SsmState::SsmState(const SsmStateLayout& l)
    : conv_floats_(l.conv_rows * l.conv_channels),
      per_layer_(l.conv_rows * l.conv_channels + l.scan_floats),
      per_seq_(l.n_layers * (l.conv_rows * l.conv_channels + l.scan_floats)),
      n_seq_(l.n_seq) {
  NEXUS_CHECK(l.n_layers >= 1 && l.n_seq >= 1 && l.conv_rows >= 0 && l.conv_channels >= 1 &&
                  l.scan_floats >= 1,
              "[ssm_state] needs at least one layer, sequence, channel and state value");
  bytes_ = static_cast<size_t>(per_seq_) * n_seq_ * sizeof(float);
  mem_ = aligned_shared(bytes_, MemCategory::kKvCache);
  data_ = static_cast<float*>(mem_.get());
  std::memset(data_, 0, bytes_);
  profile::track_buffer(data_, bytes_, MemCategory::kKvCache,
                        "ssm_state " + std::to_string(l.n_layers) + " layers x" +
                            std::to_string(n_seq_) + " sequences");
}

SsmState::~SsmState() { profile::untrack_buffer(data_); }

void SsmState::reset(int seq) {
  std::memset(data_ + seq * per_seq_, 0, per_seq_ * sizeof(float));
}

void SsmState::copy(int src, int dst) {
  if (src != dst)
    std::memcpy(data_ + dst * per_seq_, data_ + src * per_seq_, per_seq_ * sizeof(float));
}

void SsmState::save(int seq, float* out) const {
  std::memcpy(out, data_ + seq * per_seq_, per_seq_ * sizeof(float));
}

void SsmState::load(int seq, const float* in) {
  std::memcpy(data_ + seq * per_seq_, in, per_seq_ * sizeof(float));
}

}  // namespace nexus
