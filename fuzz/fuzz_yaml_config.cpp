// The YAML config layer: a schema with one key of every type (and ranges, enums, sections),
// YAML text composed and validated, then dotted overrides. Input: the YAML, then after a line
// "---overrides---" one override per line. The resolved config must round-trip through to_yaml.
#include "biofm/core/error.h"
#include "biofm/io/config.h"

namespace cfg = biofm::config;

namespace {

const cfg::Schema& schema() {
  static const cfg::Schema s = [] {
    cfg::Schema s;
    s.add({.key = "seed", .type = cfg::Type::Int, .default_value = int64_t(42), .range = cfg::ge(0)});
    s.add({.key = "num_train_steps", .type = cfg::Type::Int, .default_value = int64_t(10), .range = cfg::closed(1, 1e9)});
    s.add({.key = "device", .type = cfg::Type::Enum, .default_value = std::string("cpu"), .choices = {"cpu", "cuda"}});
    s.add({.key = "output_dir", .type = cfg::Type::String, .default_value = std::string("out")});
    s.add({.key = "recompute", .type = cfg::Type::Bool, .default_value = false});
    s.add({.key = "optimizer.lr", .type = cfg::Type::Float, .default_value = 4e-4, .range = cfg::gt(0),
           .aliases = {"learning_rate"}});
    s.add({.key = "optimizer.betas", .type = cfg::Type::FloatList, .default_value = std::vector<double>{0.9, 0.98},
           .range = cfg::half_open(0, 1), .list_size = 2});
    s.add({.key = "model.config.hidden_size", .type = cfg::Type::Int, .default_value = int64_t(320),
           .range = cfg::closed(1, 65536)});
    s.add({.key = "model.config.layer_norm_eps", .type = cfg::Type::Float, .default_value = 1e-5,
           .range = cfg::open(0, 1)});
    return s;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const std::string sep = "---overrides---\n";
  const size_t cut = in.find(sep);
  const std::string yaml = in.substr(0, cut);
  std::vector<std::string> overrides;
  if (cut != std::string::npos) {
    std::string rest = in.substr(cut + sep.size());
    for (size_t a = 0; a <= rest.size();) {
      size_t b = rest.find('\n', a);
      if (b == std::string::npos) b = rest.size();
      overrides.push_back(rest.substr(a, b - a));
      a = b + 1;
    }
  }
  try {
    cfg::Config c = cfg::load_string(schema(), yaml, overrides, "", "fuzz.yaml");
    const std::string text = c.to_yaml();
    cfg::Config back = cfg::load_string(schema(), text, {}, "", "to_yaml");
    if (!(back == c)) std::abort();  // to_yaml must read back to the same values
  } catch (const biofm::Error&) {
  }
  return 0;
}
