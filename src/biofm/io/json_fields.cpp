#include "biofm/io/json_fields.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "biofm/core/error.h"

namespace biofm {

using json = nlohmann::json;

JsonFields::JsonFields(const json& o, std::string src, std::string pre)
    : obj(o), source(std::move(src)), prefix(std::move(pre)) {
  if (!obj.is_object())
    fail(source, ": ", prefix.empty() ? std::string("expected a JSON object")
                                      : "'" + prefix.substr(0, prefix.size() - 1) + "' must be a JSON object");
}

bool JsonFields::has(const char* k) const { return obj.contains(k) && !obj[k].is_null(); }

void JsonFields::get(const char* k, int64_t& v, int64_t lo, int64_t hi) const {
  if (!has(k)) return;
  const json& x = obj[k];
  if (!x.is_number_integer()) fail(source, ": '", key(k), "' must be an integer, got ", x.dump());
  // Unsigned values above INT64_MAX are out of range whatever hi is.
  if (x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT64_MAX))
    fail(source, ": '", key(k), "' = ", x.dump(), " is out of range [", lo, ", ", hi, "]");
  const int64_t y = x.get<int64_t>();
  if (y < lo || y > hi) fail(source, ": '", key(k), "' = ", y, " is out of range [", lo, ", ", hi, "]");
  v = y;
}

void JsonFields::get(const char* k, int& v, int64_t lo, int64_t hi) const {
  int64_t y = v;
  get(k, y, std::max<int64_t>(lo, INT32_MIN), std::min<int64_t>(hi, INT32_MAX));
  v = int(y);
}

void JsonFields::get(const char* k, uint64_t& v, uint64_t hi) const {
  if (!has(k)) return;
  const json& x = obj[k];
  if (!x.is_number_integer() || (!x.is_number_unsigned() && x.get<int64_t>() < 0))
    fail(source, ": '", key(k), "' must be a non-negative integer, got ", x.dump());
  const uint64_t y = x.get<uint64_t>();
  if (y > hi) fail(source, ": '", key(k), "' = ", y, " is out of range [0, ", hi, "]");
  v = y;
}

void JsonFields::get(const char* k, double& v, double lo, double hi, bool lo_open) const {
  if (!has(k)) return;
  const json& x = obj[k];
  if (!x.is_number()) fail(source, ": '", key(k), "' must be a number, got ", x.dump());
  const double y = x.get<double>();
  if (!std::isfinite(y) || y < lo || y > hi || (lo_open && y == lo))
    fail(source, ": '", key(k), "' = ", x.dump(), " is out of range ", lo_open ? "(" : "[", lo, ", ", hi, "]");
  v = y;
}

void JsonFields::get(const char* k, float& v, double lo, double hi, bool lo_open) const {
  double y = v;
  get(k, y, lo, hi, lo_open);
  v = float(y);
}

void JsonFields::get(const char* k, bool& v) const {
  if (!has(k)) return;
  if (!obj[k].is_boolean()) fail(source, ": '", key(k), "' must be true or false, got ", obj[k].dump());
  v = obj[k].get<bool>();
}

void JsonFields::get(const char* k, std::string& v) const {
  if (!has(k)) return;
  if (!obj[k].is_string()) fail(source, ": '", key(k), "' must be a string, got ", obj[k].dump());
  v = obj[k].get<std::string>();
}

json json_float32(float v) {
  if (!std::isfinite(v)) return v;  // (nlohmann writes null for these, as for any double)
  // The float's shortest decimal, read back as the double nearest to it: a double prints as
  // its own shortest decimal, which is that one.
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  BIOFM_CHECK(ec == std::errc(), "json_float32: to_chars failed");
  double d = 0;
  std::from_chars(buf, end, d);
  return d;
}

}  // namespace biofm
