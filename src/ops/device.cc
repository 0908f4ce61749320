// Device lookup (the CPU always; CUDA through backends/cuda, which says why when it cannot),
// device tensors and the copy op between any two devices.
#include "ops/device.h"

#include <string>

#include "backends/cuda/cuda.h"

namespace nexus {

Result<const DeviceMemory*> device_memory(Device d) {
  if (d.is_cpu()) return &host_memory();
  if (Status s = cuda::init(); !s) return Status::error(d.str() + ": " + s.message());
  const DeviceMemory* m = registered_device_memory(d.type);
  if (m == nullptr) return Status::error(d.str() + ": no memory functions are registered");
  const int n = m->device_count();
  if (d.index < 0 || d.index >= n)
    return Status::error(d.str() + ": only " + std::to_string(n) + " " + m->name + " device" +
                         (n == 1 ? " is" : "s are") + " present");
  return m;
}

Result<Tensor> zeros_on(DType dtype, std::vector<int64_t> shape, Device d, MemCategory cat) {
  if (d.is_cpu()) return Tensor::zeros(dtype, std::move(shape));
  Result<const DeviceMemory*> mem = device_memory(d);
  if (!mem) return mem.status();
  const DeviceMemory* m = *mem;
  const size_t bytes = Tensor(dtype, shape, nullptr).nbytes();
  void* p = m->alloc(d.index, bytes, cat);
  if (p == nullptr)
    return Status::error(d.str() + ": out of memory allocating " + std::to_string(bytes) +
                         " bytes");
  std::shared_ptr<void> owner(p, [m, d, bytes, cat](void* q) { m->free(d.index, q, bytes, cat); });
  if (Status s = m->fill_zero(d.index, p, bytes); !s)
    return Status::error(d.str() + ": " + s.message());
  return Tensor(dtype, std::move(shape), p, std::move(owner), d);
}

Status copy(const Tensor& src, const Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.shape() != dst.shape())
    return Status::error("[copy] " + src.device().str() + " " + src.shape_str() + " " +
                         std::string(dtype_name(src.dtype())) + " to " + dst.device().str() + " " +
                         dst.shape_str() + " " + std::string(dtype_name(dst.dtype())) +
                         ": dtype and shape must match");
  const size_t bytes = src.nbytes();
  if (src.device().is_cpu() && dst.device().is_cpu())
    return host_memory().copy_within(0, dst.data(), src.data(), bytes);
  if (!src.device().is_cpu() && !dst.device().is_cpu() && src.device() != dst.device())
    return Status::error("[copy] " + src.device().str() + " to " + dst.device().str() +
                         ": copies between two accelerators go through the host");
  const Device d = src.device().is_cpu() ? dst.device() : src.device();
  Result<const DeviceMemory*> mem = device_memory(d);
  if (!mem) return Status::error("[copy] " + mem.status().message());
  const DeviceMemory* m = *mem;
  if (src.device().is_cpu()) return m->copy_from_host(d.index, dst.data(), src.data(), bytes);
  if (dst.device().is_cpu()) return m->copy_to_host(d.index, dst.data(), src.data(), bytes);
  return m->copy_within(d.index, dst.data(), src.data(), bytes);
}

Result<Tensor> to_device(const Tensor& src, Device d, MemCategory cat) {
  Result<Tensor> dst = zeros_on(src.dtype(), src.shape(), d, cat);
  if (!dst) return dst.status();
  if (Status s = copy(src, *dst); !s) return s;
  return dst;
}

}  // namespace nexus
