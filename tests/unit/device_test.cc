// Devices: names, the per-device memory registry, device tensors and the explicit copy op. The
// CUDA cases check whichever answer this machine gives: a round trip through device memory where
// a GPU is present, else an error that names the device and the reason.
#include "ops/device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/cuda/cuda.h"
#include "nexus/core/allocator.h"

namespace nexus {
namespace {

TEST(Device, ParsesNames) {
  EXPECT_EQ(*parse_device("cpu"), Device::cpu());
  EXPECT_EQ(*parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(*parse_device("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_EQ(Device::cpu().str(), "cpu");
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU"}) {
    Result<Device> d = parse_device(bad);
    ASSERT_FALSE(d) << bad;
    EXPECT_NE(d.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << d.status().message();
  }
}

TEST(Device, TensorsAreOnTheCpuUnlessMadeElsewhere) {
  EXPECT_EQ(Tensor::zeros(DType::kF32, {2, 3}).device(), Device::cpu());
  float x = 0.0f;
  EXPECT_EQ(Tensor(DType::kF32, {1}, &x).device(), Device::cpu());
  EXPECT_EQ(Tensor(DType::kF32, {1}, &x, nullptr, Device::cuda(1)).device(), Device::cuda(1));
}

TEST(Device, HostCopiesAndShapeChecks) {
  Result<Tensor> a = zeros_on(DType::kF32, {2, 4}, Device::cpu());
  ASSERT_TRUE(a) << a.status().message();
  for (int i = 0; i < 8; ++i) a->data_as<float>()[i] = 0.5f * i;
  Result<Tensor> b = to_device(*a, Device::cpu());
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_NE(b->data(), a->data());
  EXPECT_EQ(std::memcmp(a->data(), b->data(), a->nbytes()), 0);

  const Tensor wrong = Tensor::zeros(DType::kF32, {4, 2});
  const Status s = copy(*a, wrong);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("cpu 2x4 F32 to cpu 4x2 F32"), std::string::npos) << s.message();
}

TEST(Device, CudaRoundTripOrAClearReason) {
  Result<const DeviceMemory*> mem = device_memory(Device::cuda(0));
  if (!mem) {
    const std::string& m = mem.status().message();
    EXPECT_EQ(m.rfind("cuda:0: ", 0), 0u) << m;
    if (!cuda::built()) {
      EXPECT_NE(m.find("built without CUDA"), std::string::npos) << m;
    }
    Result<Tensor> t = zeros_on(DType::kF32, {4}, Device::cuda(0));
    ASSERT_FALSE(t);
    EXPECT_EQ(t.status().message(), m);
    GTEST_SKIP() << "no usable CUDA device here: " << m;
  }
  // A GPU: host -> device -> host gives the same bytes, and the device bytes are counted.
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.25f - 7.0f;
  const Tensor src(DType::kF32, {10, 100}, host.data());
  const size_t before = mem_stats().device_current[static_cast<int>(DeviceType::kCuda)];
  Result<Tensor> dev = to_device(src, Device::cuda(0));
  ASSERT_TRUE(dev) << dev.status().message();
  EXPECT_EQ(dev->device(), Device::cuda(0));
  EXPECT_EQ(mem_stats().device_current[static_cast<int>(DeviceType::kCuda)], before + 4000);
  Result<Tensor> back = to_device(*dev, Device::cpu());
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(std::memcmp(back->data(), host.data(), 4000), 0);
  const int n = (*mem)->device_count();
  Result<const DeviceMemory*> missing = device_memory(Device::cuda(n));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("present"), std::string::npos);
}

}  // namespace
}  // namespace nexus
