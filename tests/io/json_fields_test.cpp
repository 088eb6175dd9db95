// JSON fields: float32 values written as their shortest decimal.
#include "biofm/io/json_fields.h"

#include <gtest/gtest.h>

#include <limits>

using namespace biofm;

TEST(IoJsonFields, Float32IsWrittenAsItsShortestDecimal) {
  EXPECT_EQ(json_float32(0.02f).dump(), "0.02");
  EXPECT_EQ(json_float32(1e-5f).dump(), "1e-05");
  EXPECT_EQ(json_float32(1e-6f).dump(), "1e-06");
  EXPECT_EQ(json_float32(0.5f).dump(), "0.5");
  // (the float widened to a double prints its binary value's digits)
  EXPECT_EQ(nlohmann::json(0.02f).dump(), "0.019999999552965164");
  // Every value reads back as the same float.
  for (float v : {0.02f, 1e-5f, 1e-12f, 3.0f, 0.1f, 123456.789f, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), -0.3f})
    EXPECT_EQ(float(nlohmann::json::parse(json_float32(v).dump()).get<double>()), v) << v;
}
