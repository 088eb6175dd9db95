#include "biofm/io/checkpoint_manifest.h"

#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/json_fields.h"

namespace biofm {

using json = nlohmann::json;

namespace {

json parse_object(const std::string& text, const std::string& path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(path, ": not valid JSON");
  if (!j.is_object()) fail(path, ": expected a JSON object");
  return j;
}

bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

std::vector<ManifestFile> parse_checkpoint_manifest(const std::string& text, const std::string& path) {
  const json j = parse_object(text, path);
  if (!j.contains("files") || !j["files"].is_object()) fail(path, ": malformed manifest: no 'files' object");
  std::vector<ManifestFile> out;
  for (auto& [name, info] : j["files"].items()) {
    if (!plain_file_name(name)) fail(path, ": malformed manifest: '", name, "' is not a plain file name");
    if (!info.is_object() || !info.contains("bytes") || !info.contains("crc32"))
      fail(path, ": malformed manifest: 'files.", name, "' needs 'bytes' and 'crc32'");
    const JsonFields f(info, path, "files." + name + ".");
    ManifestFile m;
    m.name = name;
    uint64_t crc = 0;
    f.get("bytes", m.bytes, UINT64_MAX);
    f.get("crc32", crc, UINT32_MAX);
    m.crc32 = uint32_t(crc);
    out.push_back(std::move(m));
  }
  return out;
}

TrainerStateFields parse_trainer_state(const std::string& text, const std::string& path, int64_t expected_step) {
  const json j = parse_object(text, path);
  if (!j.contains("step") || !j.contains("data_cursor")) fail(path, ": needs 'step' and 'data_cursor'");
  const JsonFields f(j, path);
  TrainerStateFields s;
  f.get("step", s.step, 0, INT64_MAX);
  f.get("data_cursor", s.data_cursor, UINT64_MAX);
  if (expected_step >= 0 && s.step != expected_step)
    fail(path, ": step ", s.step, " does not match its directory (step_", expected_step, ")");
  return s;
}

}  // namespace biofm
