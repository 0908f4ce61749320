// Device names and the registry of per-device memory functions (the host's are built in).
#include <charconv>
#include <cstring>
#include <string>

#include "nexus/core/allocator.h"
#include "core/device_memory.h"

namespace nexus {
namespace {

void* host_alloc(int, size_t bytes, MemCategory cat) { return aligned_alloc_counted(bytes, cat); }
void host_free(int, void* p, size_t bytes, MemCategory cat) { aligned_free_counted(p, bytes, cat); }
Status host_copy(int, void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::ok();
}
Status host_fill_zero(int, void* p, size_t bytes) {
  std::memset(p, 0, bytes);
  return Status::ok();
}
int host_count() { return 1; }

const DeviceMemory kHostMemory{"cpu",     host_alloc, host_free,      host_copy,
                               host_copy, host_copy,  host_fill_zero, host_count};

const DeviceMemory* g_memory[kDeviceTypes] = {&kHostMemory, nullptr};

}  // namespace

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Result<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.substr(0, 5) == "cuda:" && text.size() > 5) {
    int index = -1;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data() + 5, end, index);
    if (ec == std::errc() && p == end && index >= 0) return Device::cuda(index);
  }
  return Status::error("unknown device '" + std::string(text) + "' (cpu, cuda or cuda:N)");
}

const DeviceMemory& host_memory() { return kHostMemory; }

void register_device_memory(DeviceType type, const DeviceMemory* memory) {
  g_memory[static_cast<int>(type)] = memory;
}

const DeviceMemory* registered_device_memory(DeviceType type) {
  return g_memory[static_cast<int>(type)];
}

}  // namespace nexus
