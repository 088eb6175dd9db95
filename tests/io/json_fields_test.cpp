// JSON fields: float32 values written as their shortest decimal.
#include "biofm/io/json_fields.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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
  // And across the range: every 4093rd positive finite float (about 520k of them; the decimal
  // is rounded twice on the way back, to a double then to a float, so check it, not assume it).
  size_t bad = 0;
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 4093) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    if (float(nlohmann::json::parse(json_float32(v).dump()).get<double>()) != v) ++bad;
  }
  EXPECT_EQ(bad, 0u);
}
