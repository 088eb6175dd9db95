#include "biofm/cli/config_flags.h"

#include <variant>

#include "biofm/cli/flags.h"
#include "biofm/io/config.h"
#include "biofm/train/config.h"

namespace biofm {

void check_config_overrides(const std::vector<std::string>& overrides) {
  if (overrides.empty()) return;
  try {
    // The built-in defaults with the overrides on top: each override is checked as loading
    // checks it (config::load_string validates keys, types, enum values and ranges).
    (void)config::load_string(train_config_schema(), "{}", overrides, "", "the config overrides");
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

namespace {

std::string value_text(const config::Value& v) {
  struct V {
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return config::format_float(x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& x) const { return x.empty() ? "\"\"" : config::yaml_quote(x); }
    std::string operator()(const std::vector<double>& x) const {
      std::string s = "[";
      for (size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + config::format_float(x[i]);
      return s + "]";
    }
  };
  return std::visit(V{}, v);
}

std::string type_text(const config::KeySpec& k) {
  switch (k.type) {
    case config::Type::Int: return "int";
    case config::Type::Float: return "float";
    case config::Type::Bool: return "bool";
    case config::Type::String: return k.string_list ? "string (or a list)" : "string";
    case config::Type::FloatList:
      return k.list_size >= 0 ? "list of " + std::to_string(k.list_size) + " floats" : "float list";
    case config::Type::Enum: {
      std::string s;
      for (const auto& c : k.choices) s += (s.empty() ? "" : "|") + (c.empty() ? std::string("\"\"") : c);
      return s;
    }
  }
  return "?";
}

}  // namespace

std::string config_keys_help() {
  std::string s =
      "config keys (key=value overrides, after the flags; the defaults shown are the built-in ones,\n"
      "which NAME.yaml may change; --print-config shows the resolved values):\n";
  for (const config::KeySpec& k : train_config_schema().keys()) {
    s += "  " + k.key + "  " + type_text(k);
    config::Range r = k.range;
    if (k.type == config::Type::Int && r.hi && *r.hi == 2147483647.0) r.hi.reset();  // (an int32 key's own bound)
    if (!r.empty()) {
      const std::string range = r.str();
      s += k.type == config::Type::FloatList ? std::string(" (each ") + range + ")" : std::string(" ") + range;
    }
    s += ", default " + value_text(k.default_value) + "\n";
    if (!k.help.empty()) s += "      " + k.help + "\n";
  }
  return s;
}

}  // namespace biofm
