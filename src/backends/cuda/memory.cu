// CUDA device memory for the device registry: buffers from a caching pool per device over
// cudaMalloc (core/caching_pool.h; counted like host memory), copies through cudaMemcpy, and the
// check that a driver and a device are there.
#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <string>

#include "backends/cuda/cuda.h"
#include "core/caching_pool.h"
#include "core/device_memory.h"

namespace nexus::cuda {
namespace {

Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}

constexpr int kMaxDevices = 16;

// Device `index`'s pool, made on first use. Never destroyed: at exit the CUDA context may already
// be gone, and the driver takes the memory back with the process.
CachingPool* pool(int index) {
  static std::array<CachingPool*, kMaxDevices> pools{};
  static std::mutex mu;
  if (index < 0 || index >= kMaxDevices) return nullptr;
  std::lock_guard lock(mu);
  if (pools[index] == nullptr)
    pools[index] = new CachingPool({[index](size_t n) -> void* {
                                      void* p = nullptr;
                                      if (cudaSetDevice(index) != cudaSuccess ||
                                          cudaMalloc(&p, n) != cudaSuccess) {
                                        cudaGetLastError();  // clear the sticky OOM error
                                        return nullptr;
                                      }
                                      return p;
                                    },
                                    [index](void* p) {
                                      cudaSetDevice(index);
                                      cudaFree(p);
                                    }});
  return pools[index];
}

void* dev_alloc(int index, size_t bytes, MemCategory cat) {
  CachingPool* pl = pool(index);
  void* p = pl == nullptr ? nullptr : pl->allocate(bytes);
  if (p != nullptr) mem_account(DeviceType::kCuda, cat, bytes, true);
  return p;
}

void dev_free(int index, void* p, size_t bytes, MemCategory cat) {
  if (p == nullptr) return;
  pool(index)->release(p);
  mem_account(DeviceType::kCuda, cat, bytes, false);
}

Status copy(int index, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (Status s = check(cudaSetDevice(index), "set device"); !s) return s;
  return check(cudaMemcpy(dst, src, bytes, kind), "copy");
}
Status from_host(int i, void* d, const void* s, size_t n) {
  return copy(i, d, s, n, cudaMemcpyHostToDevice);
}
Status to_host(int i, void* d, const void* s, size_t n) {
  return copy(i, d, s, n, cudaMemcpyDeviceToHost);
}
Status within(int i, void* d, const void* s, size_t n) {
  return copy(i, d, s, n, cudaMemcpyDeviceToDevice);
}
Status zero(int index, void* p, size_t bytes) {
  if (Status s = check(cudaSetDevice(index), "set device"); !s) return s;
  return check(cudaMemset(p, 0, bytes), "memset");
}
int count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

const DeviceMemory kCudaMemory{"cuda", dev_alloc, dev_free, from_host, to_host,
                               within, zero,      count};

}  // namespace

bool built() { return true; }

Status init() {
  static std::once_flag once;
  static Status result = Status::ok();
  std::call_once(once, [] {
    int n = 0;
    result = check(cudaGetDeviceCount(&n), "device count");
    if (result && n == 0) result = Status::error("no CUDA device is present");
    if (result) register_device_memory(DeviceType::kCuda, &kCudaMemory);
  });
  return result;
}

}  // namespace nexus::cuda
