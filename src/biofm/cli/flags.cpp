#include "biofm/cli/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "biofm/io/config.h"  // edit_distance, Schema

namespace biofm {

namespace {

const FlagSpec kHelpFlag{"--help", "", "print this help and exit"};

const FlagSpec* find_flag(const CommandSpec& spec, const std::string& name) {
  if (name == kHelpFlag.name || name == "-h") return &kHelpFlag;
  for (const auto& f : spec.flags)
    if (f.name == name) return &f;
  return nullptr;
}

// "a, b or c".
std::string either_of(const std::vector<std::string>& choices) {
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i)
    s += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return s;
}

}  // namespace

std::vector<std::string> flag_choices(const FlagSpec& f) {
  std::vector<std::string> out;
  if (f.value.find('|') == std::string::npos || f.value.find(' ') != std::string::npos) return out;
  size_t start = 0;
  for (size_t bar; (bar = f.value.find('|', start)) != std::string::npos; start = bar + 1)
    out.push_back(f.value.substr(start, bar - start));
  out.push_back(f.value.substr(start));
  return out;
}

Flags parse_flags(const CommandSpec& spec, int argc, char** argv, int first) {
  Flags out;
  out.command_ = spec.name;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (spec.flags_end_at_positional && (a == "--" || a.rfind("-", 0) != 0)) {
      out.positional_.assign(argv + i + (a == "--"), argv + argc);
      break;
    }
    if (a.rfind("-", 0) != 0 || a == "-") {
      out.positional_.push_back(a);
      continue;
    }
    std::string name = a, value;
    const auto eq = a.find('=');
    if (eq != std::string::npos) name = a.substr(0, eq), value = a.substr(eq + 1);
    const FlagSpec* f = find_flag(spec, name);
    if (!f) {
      // `--cp_size=2` (as some recipe READMEs write it): a config key, written without dashes here
      const size_t dashes = name.find_first_not_of('-');
      const std::string key = dashes == std::string::npos ? "" : name.substr(dashes);
      if (spec.config_schema && !key.empty() &&
          (spec.config_schema().find(key) || spec.config_schema().recipe_spelling(key)))
        usage_fail("biofm ", spec.name, ": unknown option '", name, "'; config keys are written without dashes: ", key,
                   "=", eq == std::string::npos ? "VALUE" : value);
      // (Hydra's --config-path is --config-dir here)
      if (name == "--config-path" && find_flag(spec, "--config-dir"))
        usage_fail("biofm ", spec.name, ": unknown option '", name, "'; did you mean '--config-dir' (Hydra's --config-path)?");
      std::string best = kHelpFlag.name;
      size_t best_d = config::edit_distance(name, best);
      for (const auto& g : spec.flags)
        if (size_t d = config::edit_distance(name, g.name); !g.hidden && d < best_d) best_d = d, best = g.name;
      usage_fail("biofm ", spec.name, ": unknown option '", name, "'; did you mean '", best, "'?");
    }
    if (f->value.empty()) {
      if (eq != std::string::npos) usage_fail("biofm ", spec.name, ": ", f->name, " takes no value");
      out.bools_.insert(f->name);
      continue;
    }
    if (eq == std::string::npos) {
      if (i + 1 >= argc) usage_fail("biofm ", spec.name, ": ", f->name, " needs a value (", f->value, ")");
      value = argv[++i];
    }
    if (const std::vector<std::string> choices = flag_choices(*f);
        !choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end())
      usage_fail("biofm ", spec.name, ": ", f->name, " must be ", either_of(choices), ", got '", value, "'");
    // (an unset shell variable: `--model "$DIR"`): a missing value, not a value to go and look for
    if (value.empty()) usage_fail("biofm ", spec.name, ": ", f->name, " needs a value (", f->value, "), got an empty one");
    out.values_[f->name] = value;
  }
  return out;
}

std::string Flags::get(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

std::string Flags::require(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) usage_fail("biofm ", command_, ": missing required option ", flag);
  return it->second;
}

long long Flags::get_int(const std::string& flag, long long fallback) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  try {
    size_t pos = 0;
    const long long v = std::stoll(it->second, &pos);
    if (pos == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  usage_fail("biofm ", command_, ": ", flag, " expects an integer, got '", it->second, "'");
}

long long Flags::get_int(const std::string& flag, long long fallback, long long lo, long long hi) const {
  const long long v = get_int(flag, fallback);
  if (has(flag) && (v < lo || v > hi)) fail_usage(flag, " must lie in [", lo, ", ", hi, "], got ", v);
  return v;
}

double Flags::get_double(const std::string& flag, double fallback, double lo, double hi) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  double v = 0;
  try {
    size_t pos = 0;
    v = std::stod(it->second, &pos);
    if (pos != it->second.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    usage_fail("biofm ", command_, ": ", flag, " expects a number, got '", it->second, "'");
  }
  if (!std::isfinite(v) || v < lo || v > hi)
    fail_usage(flag, " must be a finite number in [", lo, ", ", hi, "], got '", it->second, "'");
  return v;
}

void Flags::expect_no_positional() const {
  if (!positional_.empty())
    usage_fail("biofm ", command_, ": unexpected argument '", positional_.front(),
               "' (this command takes only --options; quote a glob given to an option)");
}

std::string help_text(const CommandSpec& spec) {
  std::string s = "usage: biofm " + spec.name + (spec.synopsis.empty() ? "" : " " + spec.synopsis) + "\n";
  if (!spec.summary.empty()) s += spec.summary + "\n";
  if (!spec.details.empty()) s += "\n" + spec.details + "\n";
  std::vector<const FlagSpec*> all;
  for (const auto& f : spec.flags)
    if (!f.hidden) all.push_back(&f);
  all.push_back(&kHelpFlag);
  s += "\noptions:\n";
  for (const FlagSpec* f : all) {
    std::string left = "  " + f->name + (f->value.empty() ? "" : " " + f->value);
    if (left.size() < 26) left.resize(26, ' ');
    else left += "\n" + std::string(26, ' ');
    s += left + f->help + "\n";
  }
  if (spec.help_tail) s += "\n" + spec.help_tail();
  return s;
}

void print_help(const CommandSpec& spec) { std::fputs(help_text(spec).c_str(), stdout); }

}  // namespace biofm
