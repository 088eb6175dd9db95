#include "biofm/models/registry.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/io/atomic_file.h"

namespace biofm {

const ModelFamily& esm2_family();   // esm2/family.cpp
const ModelFamily& llama_family();  // llama/family.cpp

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> all = {&esm2_family(), &llama_family()};
  return all;
}

std::vector<std::string> family_names() {
  std::vector<std::string> n;
  for (const ModelFamily* f : model_families()) n.push_back(f->name);
  return n;
}

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

const ModelFamily& family_named(const std::string& name) {
  for (const ModelFamily* f : model_families())
    if (f->name == name) return *f;
  fail("unknown model family '", name, "' (known: ", joined(family_names()), ")");
}

std::string model_type_of_dir(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path)) fail("'", dir, "' is not a Hugging Face model directory: no config.json");
  try {
    auto j = nlohmann::json::parse(read_file(path));
    if (!j.is_object() || !j.contains("model_type") || !j["model_type"].is_string())
      fail(path, ": no \"model_type\" string");
    return j["model_type"].get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

const ModelFamily& family_of_dir(const std::string& dir) {
  const std::string type = model_type_of_dir(dir);
  std::vector<std::string> known;
  for (const ModelFamily* f : model_families()) {
    if (f->hf_model_type == type) return *f;
    known.push_back(f->hf_model_type);
  }
  fail("'", dir, "': model_type '", type, "' is not supported (supported: ", joined(known), ")");
}

std::unique_ptr<LanguageModel> load_model_dir(const std::string& dir, Device device, Precision precision) {
  BuildOptions o;
  o.precision = precision;
  return family_of_dir(dir).load(dir, device, o);
}

}  // namespace biofm
