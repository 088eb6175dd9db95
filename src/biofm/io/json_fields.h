// Typed, range-checked reads of JSON object fields (config.json, manifests, trainer state).
// Every failure names the source file and the key; nothing here lets a nlohmann exception
// escape. Absent or null keys leave the value unchanged. And the writing of float32 fields.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace biofm {

struct JsonFields {
  const nlohmann::json& obj;  // must be an object (checked by the constructor)
  std::string source;         // file name for messages
  std::string prefix;         // "rope_parameters." for nested objects

  JsonFields(const nlohmann::json& o, std::string src, std::string pre = "");
  bool has(const char* k) const;  // present and not null
  std::string key(const char* k) const { return prefix + k; }
  // An integer in [lo, hi].
  void get(const char* k, int& v, int64_t lo, int64_t hi) const;
  void get(const char* k, int64_t& v, int64_t lo, int64_t hi) const;
  void get(const char* k, uint64_t& v, uint64_t hi) const;
  // A finite number in [lo, hi]; lo_open excludes lo itself (for "must be positive").
  void get(const char* k, double& v, double lo, double hi, bool lo_open = false) const;
  void get(const char* k, float& v, double lo, double hi, bool lo_open = false) const;
  void get(const char* k, bool& v) const;
  void get(const char* k, std::string& v) const;
};

// A float32 value as a JSON number: the shortest decimal that reads back as the same float
// (0.02, not 0.019999999552965164: how the float, widened to a double, prints).
nlohmann::json json_float32(float v);

}  // namespace biofm
