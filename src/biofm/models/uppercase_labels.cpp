#include "biofm/models/uppercase_labels.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/atomic_file.h"

namespace biofm {

namespace {

nlohmann::json read_config(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

}  // namespace

void record_uppercase_labels(const std::string& dir, bool uppercase_labels) {
  const std::string path = dir + "/config.json";
  nlohmann::json j = read_config(path);
  j[kUppercaseLabelsKey] = uppercase_labels;
  write_file_atomic(path, j.dump(2) + "\n");
}

std::optional<bool> recorded_uppercase_labels(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::is_regular_file(path)) return std::nullopt;
  const nlohmann::json j = read_config(path);
  if (!j.is_object() || !j.contains(kUppercaseLabelsKey)) return std::nullopt;
  const nlohmann::json& v = j[kUppercaseLabelsKey];
  if (!v.is_boolean()) fail(path, ": '", kUppercaseLabelsKey, "' must be true or false, got ", v.dump());
  return v.get<bool>();
}

}  // namespace biofm
