// GGUF type conversion: convert_row across F32/F16/BF16, clear errors for types it cannot handle
// yet, and which tensors convert_gguf converts.
#include "io/gguf_convert.h"

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

TEST(GgufConvert, QuantizedTypesAreNotSupportedYet) {
  std::vector<float> x(32, 1.0f), scratch;
  std::vector<uint8_t> q(34);
  const Status s = convert_row(DType::kF32, x.data(), DType::kQ8_0, q.data(), 32, scratch);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("converting F32 to Q8_0 is not supported yet"), std::string::npos)
      << s.message();
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
  // A target whose block does not divide the rows is refused with the tensor's name.
  auto q = convert_gguf(in.value(), DType::kQ8_0);
  ASSERT_FALSE(q);
  EXPECT_NE(q.status().message().find("tensor 'cube': row of 4 is not a multiple of the Q8_0"),
            std::string::npos)
      << q.status().message();
}

}  // namespace
}  // namespace nexus
