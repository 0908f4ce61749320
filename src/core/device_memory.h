// The memory of one kind of device as a table of functions (allocate, free, copy to, from and
// within it, zero-fill), so that core types (Tensor, Arena) hold device memory without knowing
// the device: the host's table is built in, a backend registers its own (backends/cuda).
#pragma once

#include <cstddef>

#include "nexus/core/allocator.h"
#include "nexus/device.h"
#include "nexus/status.h"

namespace nexus {

struct DeviceMemory {
  const char* name;
  // `bytes` on device `index`, counted under `cat` (core/allocator.h); nullptr when out of memory.
  void* (*alloc)(int index, size_t bytes, MemCategory cat);
  void (*free)(int index, void* p, size_t bytes, MemCategory cat);
  // dst on the device, src on the host; then the other way; then both on the device.
  Status (*copy_from_host)(int index, void* dst, const void* src, size_t bytes);
  Status (*copy_to_host)(int index, void* dst, const void* src, size_t bytes);
  Status (*copy_within)(int index, void* dst, const void* src, size_t bytes);
  Status (*fill_zero)(int index, void* p, size_t bytes);
  // Devices of this type present now (0 when none).
  int (*device_count)();
};

// The host's memory functions (64-byte aligned, counted; copies are memcpy).
const DeviceMemory& host_memory();
// Installs the memory functions of `type` (a backend does, before first use); null removes them.
void register_device_memory(DeviceType type, const DeviceMemory* memory);
// The functions registered for `type`, or nullptr.
const DeviceMemory* registered_device_memory(DeviceType type);

}  // namespace nexus
