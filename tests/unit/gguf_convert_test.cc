// GGUF type conversion: convert_row across F32/F16/BF16, clear errors for types it cannot handle
// yet, and which tensors convert_gguf converts.
#include "nexus/compress/gguf_convert.h"

#include <gtest/gtest.h>

#include <cmath>

namespace nexus {
namespace {

TEST(GgufConvert, RowsBetweenFloatTypes) {
  const std::vector<float> x = {0.0f, -1.5f, 3.14159f, 65504.0f, 1e-8f, -INFINITY};
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> scratch;
  std::vector<uint16_t> h(x.size()), b(x.size());
  ASSERT_TRUE(convert_row(DType::kF32, x.data(), DType::kF16, h.data(), n, scratch));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(h[i], f32_to_f16(x[i])) << i;
  ASSERT_TRUE(convert_row(DType::kF16, h.data(), DType::kBF16, b.data(), n, scratch));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(b[i], f32_to_bf16(f16_to_f32(h[i]))) << i;
  std::vector<float> back(x.size());
  ASSERT_TRUE(convert_row(DType::kBF16, b.data(), DType::kF32, back.data(), n, scratch));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], bf16_to_f32(b[i])) << i;
  ASSERT_TRUE(convert_row(DType::kF32, x.data(), DType::kF32, back.data(), n, scratch));
  EXPECT_EQ(back, x);
}

TEST(GgufConvert, QuantizedRowsMatchTheQuantizer) {
  std::vector<float> x(64), back(64), scratch;
  for (int i = 0; i < 64; ++i) x[i] = 0.1f * static_cast<float>(i - 30);
  std::vector<uint8_t> q(68);
  ASSERT_TRUE(convert_row(DType::kF32, x.data(), DType::kQ8_0, q.data(), 64, scratch));
  // Q8_0 of values with |x| <= 3.3: scale 3.3/127, so every value is within half a step.
  ASSERT_TRUE(convert_row(DType::kQ8_0, q.data(), DType::kF32, back.data(), 64, scratch));
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(back[i], x[i], 3.3f / 127 / 2 + 1e-6f) << i;
  EXPECT_FALSE(convert_row(DType::kF32, x.data(), DType::kI8, q.data(), 64, scratch));
}

TEST(GgufConvert, FallbackTypesForRowsThatDoNotFillABlock) {
  EXPECT_EQ(fallback_type(DType::kQ4_K, 512), DType::kQ4_K);
  EXPECT_EQ(fallback_type(DType::kQ4_K, 288), DType::kQ8_0);
  EXPECT_EQ(fallback_type(DType::kQ4_0, 172), DType::kF16);
  EXPECT_EQ(fallback_type(DType::kBF16, 172), DType::kBF16);
}

TEST(GgufConvert, FileTypes) {
  EXPECT_EQ(file_type_for(DType::kF32), 0u);
  EXPECT_EQ(file_type_for(DType::kF16), 1u);
  EXPECT_EQ(file_type_for(DType::kBF16), 32u);
  EXPECT_EQ(file_type_for(DType::kQ8_0), 7u);
  EXPECT_EQ(file_type_for(DType::kI32), std::nullopt);
}

TEST(GgufConvert, WhichTensorsConvert) {
  GgufWriter w;
  w.set_u32("general.file_type", 0);
  std::vector<float> m(2 * 3 * 4, 0.25f);
  std::vector<int32_t> ids(4, 7);
  w.add_tensor("cube", DType::kF32, {2, 3, 4}, m.data());
  w.add_tensor("vec", DType::kF32, {4}, m.data());
  w.add_tensor("ids", DType::kI32, {2, 2}, ids.data());
  const std::vector<uint8_t> img = w.serialize();
  auto in = GgufFile::parse(img, nullptr, "in");
  ASSERT_TRUE(in) << in.status().message();
  auto out = convert_gguf(in.value(), DType::kBF16);
  ASSERT_TRUE(out) << out.status().message();
  const std::vector<uint8_t> img2 = out->serialize();
  auto g = GgufFile::parse(img2, nullptr, "out");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->find_tensor("cube")->dtype, DType::kBF16);
  EXPECT_EQ(g->find_tensor("cube")->shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(g->find_tensor("vec")->dtype, DType::kF32);
  EXPECT_EQ(g->find_tensor("ids")->dtype, DType::kI32);
  EXPECT_EQ(g->get_int("general.file_type"), 32);
  // A target whose block does not divide the rows falls back to F16 for that tensor.
  auto q = convert_gguf(in.value(), DType::kQ8_0);
  ASSERT_TRUE(q) << q.status().message();
  std::vector<uint8_t> qimg = q->serialize();
  auto gq = GgufFile::parse(qimg, nullptr, "q");
  ASSERT_TRUE(gq) << gq.status().message();
  EXPECT_EQ(gq->find_tensor("cube")->dtype, DType::kF16);
}

}  // namespace
}  // namespace nexus
