// The profiler span of a training op front-end (`nexus train --profile`): named `name`, in the
// current layer, with the bytes moved and flops done (both evaluated only while profiling is on).
#pragma once

#include <string_view>

#include "nexus/profile.h"

#define NEXUS_OP_SPAN(name, bytes, flops) \
  NEXUS_PROFILE_OP(name, ::nexus::profile::current_layer(), (bytes), (flops), std::string_view())
