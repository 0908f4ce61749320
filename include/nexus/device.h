// Where a tensor's memory lives and where the ops on it run: the host CPU or a CUDA device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nexus/status.h"

namespace nexus {

enum class DeviceType : uint8_t { kCpu, kCuda };
inline constexpr int kDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;  // which device of its type (always 0 for the CPU)

  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::kCuda, index}; }
  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  // "cpu" or "cuda:N".
  std::string str() const;
};

// Parses "cpu", "cuda" (device 0) or "cuda:N"; an error names the text for anything else.
Result<Device> parse_device(std::string_view text);

}  // namespace nexus
