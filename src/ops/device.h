// Devices for ops: bringing a device's backend up, tensors allocated on a device, and the explicit
// copies between devices (host <-> device is always a visible op, never implicit).
#pragma once

#include <cstdint>
#include <vector>

#include "nexus/core/allocator.h"
#include "core/device_memory.h"
#include "nexus/device.h"
#include "nexus/status.h"
#include "nexus/tensor.h"

namespace nexus {

// The memory functions of `d` once its backend is up. Errors name the device and the reason
// ("cuda:0: nexus was built without CUDA ...", "cuda:1: only 1 CUDA device is present").
Result<const DeviceMemory*> device_memory(Device d);

// A zero-filled tensor of `dtype` and `shape` on `d`, counted under `cat`; an error when the
// device cannot be used or is out of memory.
Result<Tensor> zeros_on(DType dtype, std::vector<int64_t> shape, Device d,
                        MemCategory cat = MemCategory::kActivations);

// dst = src for tensors of the same dtype and shape on any two devices (host to device, device
// to host, within one device). Errors name both devices and shapes.
Status copy(const Tensor& src, const Tensor& dst);

// A copy of `src` on `d` (a new allocation even when src is already there).
Result<Tensor> to_device(const Tensor& src, Device d, MemCategory cat = MemCategory::kActivations);

}  // namespace nexus
