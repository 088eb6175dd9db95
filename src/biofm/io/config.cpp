#include "biofm/io/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "biofm/core/error.h"

namespace fs = std::filesystem;

namespace biofm::config {

// ---------------------------------------------------------------------------------------------
// Small helpers

const char* type_name(Type t) {
  switch (t) {
    case Type::Int: return "an int";
    case Type::Float: return "a float";
    case Type::Bool: return "a bool (true/false)";
    case Type::String: return "a string";
    case Type::Enum: return "one of";
    case Type::FloatList: return "a list of floats";
  }
  return "?";
}

// A key's type as `--help` lists it: "int", "string (or a list)", "list of 2 floats", "a|b|c".
static std::string type_text(const KeySpec& k) {
  switch (k.type) {
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::Bool: return "bool";
    case Type::String: return k.string_list ? "string (or a list)" : "string";
    case Type::FloatList:
      if (k.whole_numbers) return "list of whole numbers";
      return k.list_size >= 0 ? "list of " + std::to_string(k.list_size) + " floats" : "float list";
    case Type::Enum: {
      std::string s;
      for (const auto& c : k.choices) s += (s.empty() ? "" : "|") + (c.empty() ? std::string("\"\"") : c);
      return s;
    }
  }
  return "?";
}

static std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

static std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

static bool starts_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

static std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

static std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

static std::string parent_of(const std::string& key) {
  size_t p = key.rfind('.');
  return p == std::string::npos ? "" : key.substr(0, p);
}

static std::string last_of(const std::string& key) {
  size_t p = key.rfind('.');
  return p == std::string::npos ? key : key.substr(p + 1);
}

static std::string fmt_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Did-you-mean suggestions compare at most this many leading characters: a longer name is near
// no key anyway, and the distance is O(length x length) (a fuzzed 8 KB key took milliseconds).
constexpr size_t kSuggestChars = 128;

// Outside the fuzzers' coverage tracing: a plain dynamic program whose every comparison would be
// traced (most of the YAML fuzz target's time went here, none of its coverage).
#if defined(__clang__)
__attribute__((no_sanitize("coverage")))
#endif
size_t edit_distance(std::string_view a, std::string_view b) {
  a = a.substr(0, kSuggestChars);
  b = b.substr(0, kSuggestChars);
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min(std::min(prev[j], cur[j - 1]) + 1, sub);
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string format_float(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  // Plain decimals in the usual range (0.0004, 10000.0), exponents outside it (1.0e-08).
  const double a = std::fabs(v);
  const auto style = (a == 0 || (a >= 1e-4 && a < 1e16)) ? std::chars_format::fixed
                                                         : std::chars_format::scientific;
  char buf[400];
  auto r = std::to_chars(buf, buf + sizeof buf, v, style);
  std::string s(buf, r.ptr);
  size_t e = s.find('e');
  if (s.find('.') == std::string::npos) {
    if (e == std::string::npos) {
      s += ".0";
    } else {
      s.insert(e, ".0");
    }
  }
  return s;
}

std::string yaml_quote(const std::string& s) {
  static const std::set<std::string> reserved = {"true", "false", "yes", "no", "on", "off",
                                                 "y", "n", "null", "~"};
  bool plain = !s.empty() && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_' ||
                              s[0] == '/');
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/' || c == '.' ||
          c == '-' || c == '+')) {
      plain = false;
    }
  }
  if (plain && !reserved.count(lower(s))) return s;
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

static std::string value_str(const Value& v) {
  struct V {
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return format_float(x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& x) const { return yaml_quote(x); }
    std::string operator()(const std::vector<double>& x) const {
      std::string s = "[";
      // (whole numbers as integers: a list such as fp8_layers reads back as it was written)
      for (size_t i = 0; i < x.size(); ++i) {
        const bool whole = std::isfinite(x[i]) && x[i] == std::trunc(x[i]) && std::fabs(x[i]) < 1e15;
        s += (i ? ", " : "") + (whole ? std::to_string(int64_t(x[i])) : format_float(x[i]));
      }
      return s + "]";
    }
  };
  return std::visit(V{}, v);
}

static std::string choices_str(const std::vector<std::string>& choices) {
  std::vector<std::string> q;
  for (const auto& c : choices) q.push_back(c.empty() ? "\"\"" : c);
  return join(q, ", ");
}

// ---------------------------------------------------------------------------------------------
// Range

bool Range::contains(double v) const {
  if (std::isnan(v)) return false;
  if (lo && (lo_open ? !(v > *lo) : !(v >= *lo))) return false;
  if (hi && (hi_open ? !(v < *hi) : !(v <= *hi))) return false;
  return true;
}

std::string Range::str() const {
  if (lo && hi) {
    return std::string("in ") + (lo_open ? "(" : "[") + fmt_number(*lo) + ", " + fmt_number(*hi) +
           (hi_open ? ")" : "]");
  }
  if (lo) return std::string(lo_open ? "> " : ">= ") + fmt_number(*lo);
  if (hi) return std::string(hi_open ? "< " : "<= ") + fmt_number(*hi);
  return "any";
}

Range gt(double lo) { return Range{lo, std::nullopt, true, false}; }
Range ge(double lo) { return Range{lo, std::nullopt, false, false}; }
Range closed(double lo, double hi) { return Range{lo, hi, false, false}; }
Range half_open(double lo, double hi) { return Range{lo, hi, false, true}; }
Range open(double lo, double hi) { return Range{lo, hi, true, true}; }

// ---------------------------------------------------------------------------------------------
// Value checks shared by the schema, Config::set and loading

// Empty when v fits spec's type (and enum choices); otherwise what is wrong.
static std::string type_problem(const KeySpec& spec, const Value& v) {
  bool ok = false;
  switch (spec.type) {
    case Type::Int: ok = std::holds_alternative<int64_t>(v); break;
    case Type::Float: ok = std::holds_alternative<double>(v); break;
    case Type::Bool: ok = std::holds_alternative<bool>(v); break;
    case Type::String: ok = std::holds_alternative<std::string>(v); break;
    case Type::Enum:
      if (!std::holds_alternative<std::string>(v)) break;
      if (std::find(spec.choices.begin(), spec.choices.end(), std::get<std::string>(v)) ==
          spec.choices.end()) {
        return "config key '" + spec.key + "' must be one of " + choices_str(spec.choices) +
               "; got " + value_str(v);
      }
      ok = true;
      break;
    case Type::FloatList: {
      if (!std::holds_alternative<std::vector<double>>(v)) break;
      const auto& l = std::get<std::vector<double>>(v);
      if (spec.list_size >= 0 && int(l.size()) != spec.list_size) {
        return "config key '" + spec.key + "' expects a list of " +
               std::to_string(spec.list_size) + " floats; got " + value_str(v);
      }
      ok = true;
      break;
    }
  }
  if (ok) return "";
  return "config key '" + spec.key + "' expects " + type_name(spec.type) + "; got " +
         value_str(v);
}

static std::string range_problem(const KeySpec& spec, const Value& v) {
  if (spec.range.empty()) return "";
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (!spec.range.contains(double(*i))) {
      return "config key '" + spec.key + "' must be " + spec.range.str() + "; got " +
             std::to_string(*i);
    }
  } else if (const auto* d = std::get_if<double>(&v)) {
    if (!spec.range.contains(*d)) {
      return "config key '" + spec.key + "' must be " + spec.range.str() + "; got " +
             format_float(*d);
    }
  } else if (const auto* l = std::get_if<std::vector<double>>(&v)) {
    if (spec.layer_numbers) {  // (whole numbers already: convert checked them)
      for (size_t k = 0; k < l->size(); ++k) {
        const std::string layer = value_str(std::vector<double>{(*l)[k]});
        const std::string n = layer.substr(1, layer.size() - 2);
        if ((*l)[k] < 1)
          return "config key '" + spec.key + "' lists layers 1-indexed (1..num_layers); " + n +
                 " is not a layer number (in " + value_str(v) + ")";
        for (size_t j = 0; j < k; ++j)
          if ((*l)[j] == (*l)[k])
            return "config key '" + spec.key + "' lists layer " + n + " twice (in " + value_str(v) +
                   "); give each layer once";
      }
      return "";
    }
    for (size_t k = 0; k < l->size(); ++k) {
      if (!spec.range.contains((*l)[k])) {
        return "config key '" + spec.key + "' needs every element " + spec.range.str() +
               "; element " + std::to_string(k) + " is " + format_float((*l)[k]) + " in " +
               value_str(v);
      }
    }
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Schema

void Schema::add(KeySpec spec) {
  const std::string& key = spec.key;
  BIOFM_CHECK(!key.empty(), "empty schema key");
  for (const auto& part : split(key, '.')) {
    BIOFM_CHECK(!part.empty(), "malformed schema key '", key, "'");
  }
  BIOFM_CHECK(key != "defaults", "'defaults' is reserved for composition");
  BIOFM_CHECK(!index_.count(key), "schema key '", key, "' declared twice");
  BIOFM_CHECK(!children_.count(key), "schema key '", key, "' is already a section");
  for (std::string p = parent_of(key); !p.empty(); p = parent_of(p)) {
    BIOFM_CHECK(!index_.count(p), "schema key '", key, "' lies under leaf key '", p, "'");
  }
  if (spec.type == Type::Float && std::holds_alternative<int64_t>(spec.default_value)) {
    spec.default_value = double(std::get<int64_t>(spec.default_value));
  }
  std::string problem = type_problem(spec, spec.default_value);
  if (problem.empty()) problem = range_problem(spec, spec.default_value);
  BIOFM_CHECK(problem.empty(), "bad schema default: ", problem);
  BIOFM_CHECK(spec.type != Type::Enum || !spec.choices.empty(), "enum key '", key,
              "' without choices");

  // Register the key with every section on its path.
  std::string child = key;
  for (std::string p = parent_of(key);; p = parent_of(p)) {
    auto& kids = children_[p];
    std::string name = last_of(child);
    if (std::find(kids.begin(), kids.end(), name) == kids.end()) kids.push_back(name);
    if (p.empty()) break;
    child = p;
  }
  index_[key] = keys_.size();
  keys_.push_back(std::move(spec));
}

const KeySpec* Schema::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &keys_[it->second];
}

bool Schema::is_section(const std::string& key) const { return children_.count(key) != 0; }

size_t Schema::index(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) {
    fail("unknown config key '", key, "'", did_you_mean(key));
  }
  return it->second;
}

const std::vector<std::string>& Schema::children(const std::string& section) const {
  static const std::vector<std::string> none;
  auto it = children_.find(section);
  return it == children_.end() ? none : it->second;
}

static std::string initials(const std::string& name) {
  if (name.find('_') == std::string::npos) return "";
  std::string out;
  for (const auto& w : split(name, '_')) {
    if (!w.empty()) out += w[0];
  }
  return out;
}

// Whether the words of `a` ("num_heads") appear, in order, among those of the longer `b`
// ("num_attention_heads").
static bool words_subsequence(const std::string& a, const std::string& b) {
  if (a.empty() || a.size() >= b.size()) return false;
  auto wa = split(a, '_'), wb = split(b, '_');
  size_t j = 0;
  for (const auto& w : wb) {
    if (j < wa.size() && wa[j] == w) ++j;
  }
  return j == wa.size();
}

// Whether the components of `a` appear, in order, among those of `b` ("model" in
// "model.config", "" in anything).
static bool components_subsequence(const std::string& a, const std::string& b) {
  if (a.empty()) return true;
  auto pa = split(a, '.'), pb = split(b, '.');
  size_t j = 0;
  for (const auto& c : pb) {
    if (j < pa.size() && pa[j] == c) ++j;
  }
  return j == pa.size();
}

std::string Schema::suggest(const std::string& unknown_key) const {
  if (keys_.empty()) return "";
  // (truncated like edit_distance's inputs: the component splits below run once per key)
  const std::string u = lower(unknown_key.substr(0, kSuggestChars));
  const std::string pu = parent_of(u), lu = last_of(u);
  size_t best = std::numeric_limits<size_t>::max(), best_last = 0, best_full = 0;
  bool best_same_parent = false, best_alias = false;
  const KeySpec* best_spec = nullptr;
  for (const auto& spec : keys_) {
    const std::string& c = spec.key;
    const std::string pc = parent_of(c), lc = last_of(c);
    size_t d_full = edit_distance(u, c);

    size_t d_last = edit_distance(lu, lc);
    if ((!initials(lu).empty() && initials(lu) == lc) ||
        (!initials(lc).empty() && initials(lc) == lu)) {
      d_last = std::min<size_t>(d_last, 1);
    }
    if (words_subsequence(lu, lc) || words_subsequence(lc, lu)) {
      d_last = std::min<size_t>(d_last, 2);  // "warmup" vs "warmup_steps", "num_heads" vs ...
    }
    bool alias_full = false;
    for (const auto& a : spec.aliases) {
      if (a.find('.') != std::string::npos) {
        if (lower(a) == u) alias_full = true;
      } else if (lower(a) == lu) {
        d_last = 0;
      }
    }
    size_t d_parent = edit_distance(pu, pc);
    if (pu != pc && components_subsequence(pu, pc)) d_parent = std::min<size_t>(d_parent, 1);

    size_t score = alias_full ? 0 : std::min(d_full, d_last + d_parent);
    bool same_parent = pu == pc;
    if (score < best || (score == best && same_parent && !best_same_parent)) {
      best = score;
      best_same_parent = same_parent;
      best_spec = &spec;
      best_last = d_last, best_full = d_full, best_alias = alias_full;
    }
  }
  // Only a near name is worth offering: its last component (or the whole key) a few edits away.
  // ("foo.bar" is near no key; offering "seed" would only mislead.)
  const bool near = best_alias || best_last <= std::max<size_t>(2, lu.size() / 2) || best_full <= u.size() / 3;
  return near ? best_spec->key : "";
}

std::string Schema::did_you_mean(const std::string& unknown_key) const {
  const std::string s = suggest(unknown_key);
  return s.empty() ? "" : "; did you mean '" + s + "'?";
}

void Schema::add_recipe_spelling(RecipeSpelling r) {
  if (find(r.recipe_key) || is_section(r.recipe_key)) fail("recipe spelling '", r.recipe_key, "' is one of our keys");
  if (!r.key.empty() && !find(r.key)) fail("recipe spelling '", r.recipe_key, "' names an unknown key '", r.key, "'");
  recipe_spellings_.push_back(std::move(r));
}

const RecipeSpelling* Schema::recipe_spelling(const std::string& key) const {
  for (const auto& r : recipe_spellings_)
    if (r.recipe_key == key || r.recipe_key == key + ".*") return &r;  // (a section written empty: `wandb: {}`)
  for (std::string p = parent_of(key); !p.empty(); p = parent_of(p))
    for (const auto& r : recipe_spellings_)
      if (r.recipe_key == p + ".*") return &r;
  return nullptr;
}

std::string Schema::describe() const {
  std::string s;
  for (const KeySpec& k : keys_) {
    s += "  " + k.key + "  " + type_text(k);
    Range r = k.range;
    if (k.type == Type::Int && r.hi && *r.hi == 2147483647.0) r.hi.reset();  // (an int32 key's own bound)
    if (!r.empty()) s += k.type == Type::FloatList ? " (each " + r.str() + ")" : " " + r.str();
    s += ", default " + value_str(k.default_value) + "\n";
    if (!k.help.empty()) s += "      " + k.help + "\n";
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Config

Config::Config(const Schema& schema) : schema_(&schema) {
  for (const auto& spec : schema.keys()) {
    values_.push_back(spec.default_value);
    origins_.push_back("default");
  }
}

const Value& Config::get(const std::string& key) const { return values_[schema_->index(key)]; }

template <class T>
static const T& get_as(const Config& c, const std::string& key, const char* what) {
  const Value& v = c.get(key);
  const T* p = std::get_if<T>(&v);
  if (!p) fail("config key '", key, "' is not ", what);
  return *p;
}

int64_t Config::get_int(const std::string& key) const {
  return get_as<int64_t>(*this, key, "an int");
}
double Config::get_float(const std::string& key) const {
  return get_as<double>(*this, key, "a float");
}
bool Config::get_bool(const std::string& key) const { return get_as<bool>(*this, key, "a bool"); }
const std::string& Config::get_string(const std::string& key) const {
  return get_as<std::string>(*this, key, "a string");
}
const std::vector<double>& Config::get_float_list(const std::string& key) const {
  return get_as<std::vector<double>>(*this, key, "a float list");
}

void Config::set(const std::string& key, Value v, std::string origin) {
  size_t i = schema_->index(key);
  const KeySpec& spec = schema_->keys()[i];
  if (spec.type == Type::Float && std::holds_alternative<int64_t>(v)) {
    v = double(std::get<int64_t>(v));
  }
  std::string problem = type_problem(spec, v);
  if (!problem.empty()) fail(problem);
  values_[i] = std::move(v);
  origins_[i] = std::move(origin);
}

const std::string& Config::origin(const std::string& key) const {
  return origins_[schema_->index(key)];
}

std::vector<std::string> Config::check_ranges() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < values_.size(); ++i) {
    std::string p = range_problem(schema_->keys()[i], values_[i]);
    if (!p.empty()) out.push_back(p + " (" + origins_[i] + ")");
  }
  return out;
}

static void render(const Config& c, const std::string& section, int indent, std::string& out) {
  for (const auto& name : c.schema().children(section)) {
    std::string path = section.empty() ? name : section + "." + name;
    out += std::string(size_t(indent), ' ') + name + ":";
    if (c.schema().find(path)) {
      out += " " + value_str(c.get(path)) + "\n";
    } else {
      out += "\n";
      render(c, path, indent + 2, out);
    }
  }
}

std::string Config::to_yaml(const std::string& header) const {
  std::string out;
  if (!header.empty()) {
    for (const auto& line : split(header, '\n')) out += line.empty() ? "#\n" : "# " + line + "\n";
  }
  render(*this, "", 0, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Scalar parsing (YAML 1.1-ish, the way Hydra/OmegaConf users write values)

static std::string numeric_text(const std::string& s) {
  // Digit separators as in `2_000` are allowed between digits.
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit((unsigned char)s[i - 1]) &&
        std::isdigit((unsigned char)s[i + 1])) {
      continue;
    }
    out += s[i];
  }
  return out;
}

static bool parse_float(const std::string& text, double& out) {
  std::string s = numeric_text(trim(text));
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isdigit((unsigned char)c) || c == '.' || c == 'e' || c == 'E' || c == '+' ||
          c == '-')) {
      return false;
    }
  }
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  out = v;
  return true;
}

static bool parse_int(const std::string& text, int64_t& out) {
  std::string s = numeric_text(trim(text));
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  int64_t v = 0;
  auto r = std::from_chars(b, e, v);
  if (r.ec == std::errc() && r.ptr == e) {
    out = v;
    return true;
  }
  // 1e5 or 2000.0: accepted when the value is a whole number that an int64 holds exactly.
  double d = 0;
  if (parse_float(s, d) && d == std::floor(d) && std::fabs(d) <= 9007199254740992.0) {
    out = int64_t(d);
    return true;
  }
  return false;
}

static bool parse_bool(const std::string& text, bool& out) {
  std::string s = lower(trim(text));
  if (s == "true" || s == "yes" || s == "on") {
    out = true;
    return true;
  }
  if (s == "false" || s == "no" || s == "off") {
    out = false;
    return true;
  }
  return false;
}

static std::string node_str(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "null";
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// Converts a YAML node to the key's type; on failure returns false with `err` set.
static bool convert(const YAML::Node& n, const KeySpec& spec, Value& out, std::string& err) {
  const std::string& key = spec.key;
  auto bad = [&](const std::string& expected) {
    err = "config key '" + key + "' expects " + expected + "; got " + node_str(n);
    return false;
  };
  switch (spec.type) {
    case Type::Int: {
      int64_t v = 0;
      if (!n.IsScalar() || !parse_int(n.Scalar(), v)) return bad("an int");
      out = v;
      break;
    }
    case Type::Float: {
      double v = 0;
      if (!n.IsScalar() || !parse_float(n.Scalar(), v)) return bad("a float");
      out = v;
      break;
    }
    case Type::Bool: {
      bool v = false;
      if (!n.IsScalar() || !parse_bool(n.Scalar(), v)) return bad("a bool (true/false)");
      out = v;
      break;
    }
    case Type::String:
      if (n.IsNull()) {
        out = std::string();
      } else if (n.IsScalar()) {
        out = n.Scalar();
      } else if (spec.string_list && n.IsSequence()) {
        std::string joined;
        for (const auto& item : n) {
          if (!item.IsScalar() || item.Scalar().find(',') != std::string::npos)
            return bad("a string or a list of strings without commas");
          joined += (joined.empty() ? "" : ",") + item.Scalar();
        }
        out = joined;
      } else {
        return bad(spec.string_list ? "a string or a list of strings" : "a string");
      }
      break;
    case Type::Enum: {
      std::string v;
      if (n.IsNull()) {
        v = "";
      } else if (n.IsScalar()) {
        v = n.Scalar();
      } else {
        return bad("one of " + choices_str(spec.choices));
      }
      if (std::find(spec.choices.begin(), spec.choices.end(), v) == spec.choices.end()) {
        err = "config key '" + key + "' must be one of " + choices_str(spec.choices) + "; got " +
              node_str(n);
        std::string best;
        size_t best_d = std::numeric_limits<size_t>::max();
        for (const auto& c : spec.choices) {
          size_t d = edit_distance(lower(v), c);
          if (d < best_d) best_d = d, best = c;
        }
        if (!best.empty() && best_d <= std::max<size_t>(1, v.size() / 4)) {
          err += "; did you mean '" + best + "'?";
        }
        return false;
      }
      out = v;
      break;
    }
    case Type::FloatList: {
      const std::string what = spec.whole_numbers ? " whole numbers" : " floats";
      const std::string expected =
          spec.list_size >= 0 ? "a list of " + std::to_string(spec.list_size) + what : "a list of" + what;
      const std::string example = spec.whole_numbers ? " like [1, 2]" : " like [0.9, 0.98]";
      if (n.IsNull() && spec.list_size < 0) {  // null: the empty list (the recipes' "not given")
        out = std::vector<double>{};
        break;
      }
      if (!n.IsSequence()) return bad(expected + example);
      std::vector<double> v;
      for (const auto& item : n) {
        double d = 0;
        if (!item.IsScalar() || !parse_float(item.Scalar(), d)) return bad(expected);
        if (spec.whole_numbers && d != std::floor(d)) return bad(expected + example);
        v.push_back(d);
      }
      if (spec.list_size >= 0 && int(v.size()) != spec.list_size) return bad(expected);
      out = std::move(v);
      break;
    }
  }
  err = range_problem(spec, out);
  return err.empty();
}

// ---------------------------------------------------------------------------------------------
// Composition into a flat map of dotted paths. A later layer replaces a path and everything
// under it; maps merge key by key (a deep merge). An empty map or null given for a path that
// already has children merges nothing.

namespace {

struct Entry {
  YAML::Node node;
  std::string origin;
  size_t seq = 0;  // order written, so that problems are reported in file/override order
};
using Flat = std::map<std::string, Entry>;

struct Problems {
  static constexpr size_t kMaxShown = 25;  // the error lists these, then "... and N more"
  std::vector<std::string> list;
  void add(std::string s) { list.push_back(std::move(s)); }
  // The unknown-key message; the suggestion (a search over every key) only where it is shown.
  void add_unknown_key(const Schema& schema, const std::string& key, const std::string& origin) {
    std::string msg = "unknown config key '" + key + "'";
    if (list.size() < kMaxShown) msg += schema.did_you_mean(key);
    add(msg + " (" + origin + ")");
  }
};

bool is_empty_mapping(const YAML::Node& n) {
  return !n.IsDefined() || n.IsNull() || (n.IsMap() && n.size() == 0);
}

bool has_under(const Flat& f, const std::string& p) {
  std::string pre = p + ".";
  auto it = f.lower_bound(pre);
  return it != f.end() && starts_with(it->first, pre);
}

void erase_under(Flat& f, const std::string& p) {
  std::string pre = p + ".";
  auto it = f.lower_bound(pre);
  while (it != f.end() && starts_with(it->first, pre)) it = f.erase(it);
}

void erase_ancestors(Flat& f, const std::string& p) {
  for (size_t i = p.find('.'); i != std::string::npos; i = p.find('.', i + 1)) {
    f.erase(p.substr(0, i));
  }
}

std::string where(const std::string& file, const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return file;
  return file + ":" + std::to_string(m.line + 1);
}

void put(Flat& f, const std::string& path, const YAML::Node& node, const std::string& origin,
         const std::string& file, Problems& probs) {
  if (node.IsMap() && node.size() > 0) {
    f.erase(path);
    for (const auto& kv : node) {
      std::string here = file.empty() ? origin : where(file, kv.first.Mark());
      if (!kv.first.IsScalar() || trim(kv.first.Scalar()).empty()) {
        probs.add("config keys must be plain names; got " + node_str(kv.first) +
                  (path.empty() ? "" : " under '" + path + "'") + " (" + here + ")");
        continue;
      }
      std::string k = kv.first.Scalar();
      put(f, path.empty() ? k : path + "." + k, kv.second, here, file, probs);
    }
    return;
  }
  if (path.empty()) {
    if (!is_empty_mapping(node)) {
      probs.add("a config must be a mapping of keys to values; got " + node_str(node) + " (" +
                origin + ")");
    }
    return;
  }
  if (is_empty_mapping(node) && has_under(f, path)) return;
  erase_under(f, path);
  erase_ancestors(f, path);
  static std::atomic<size_t> counter{0};  // only orders entries; any increasing sequence will do
  f[path] = Entry{node, origin, ++counter};
}

std::string strip_ext(const std::string& name) {
  for (const char* ext : {".yaml", ".yml"}) {
    std::string e = ext;
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      return name.substr(0, name.size() - e.size());
    }
  }
  return name;
}

std::string display_path(const std::string& dir, const std::string& file) {
  if (dir.empty()) return file;
  return (fs::path(dir) / file).string();
}

[[noreturn]] void not_found(const std::string& dir, const std::string& name,
                            const std::string& context) {
  std::ostringstream os;
  if (!fs::is_directory(dir)) {
    os << "config '" << name << "' not found: config directory '" << dir
       << "' does not exist" << context;
    throw Error(os.str());
  }
  auto avail = list_configs(dir);
  os << "config '" << name << "' not found in '" << dir << "' (no "
     << display_path(dir, name + ".yaml") << ")" << context;
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& a : avail) {
    size_t d = edit_distance(name, a);
    if (d < best_d) best_d = d, best = a;
  }
  if (!best.empty() && best_d <= std::max<size_t>(3, name.size() / 3)) {
    os << "; did you mean '" << best << "'?";
  }
  os << "; available configs: " << (avail.empty() ? "(none)" : join(avail, ", "));
  throw Error(os.str());
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) fail(source, ": YAML syntax error: ", e.msg);
    fail(source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": YAML syntax error: ", e.msg);
  }
}

void compose_node(Flat& f, const YAML::Node& root, const std::string& source,
                  const std::string& dir, std::vector<std::string>& stack, Problems& probs);

void compose_file(Flat& f, const std::string& dir, const std::string& raw_name,
                  std::vector<std::string>& stack, const std::string& context,
                  Problems& probs) {
  std::string name = strip_ext(raw_name);
  fs::path path = fs::path(dir) / (name + ".yaml");
  if (!fs::is_regular_file(path)) path = fs::path(dir) / (name + ".yml");
  if (!fs::is_regular_file(path)) not_found(dir, name, context);
  std::string shown = path.string();
  std::string canon = fs::weakly_canonical(path).string();
  if (std::find(stack.begin(), stack.end(), canon) != stack.end()) {
    std::vector<std::string> chain;
    for (const auto& s : stack) chain.push_back(fs::path(s).stem().string());
    chain.push_back(name);
    fail("config defaults form a cycle: ", join(chain, " -> "));
  }
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read config file ", shown);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  stack.push_back(canon);
  compose_node(f, parse_yaml(text, shown), shown, dir, stack, probs);
  stack.pop_back();
}

void compose_node(Flat& f, const YAML::Node& root, const std::string& source,
                  const std::string& dir, std::vector<std::string>& stack, Problems& probs) {
  if (is_empty_mapping(root)) return;
  if (!root.IsMap()) {
    probs.add(source + ": a config must be a mapping of keys to values; got " + node_str(root));
    return;
  }
  YAML::Node defaults;
  for (const auto& kv : root) {
    if (kv.first.IsScalar() && kv.first.Scalar() == "defaults") defaults = kv.second;
  }
  // This file's own keys (everything but `defaults`), applied at the position of `_self_`
  // in the defaults list, or after all of them (Hydra's default).
  auto apply_rest = [&] {
    for (const auto& kv : root) {
      if (kv.first.IsScalar() && kv.first.Scalar() == "defaults") continue;
      std::string here = where(source, kv.first.Mark());
      if (!kv.first.IsScalar() || trim(kv.first.Scalar()).empty()) {
        probs.add("config keys must be plain names; got " + node_str(kv.first) + " (" + here +
                  ")");
        continue;
      }
      put(f, kv.first.Scalar(), kv.second, here, source, probs);
    }
  };
  if (!defaults.IsDefined() || defaults.IsNull()) {
    apply_rest();
    return;
  }
  if (!defaults.IsSequence()) {
    probs.add(source + ": 'defaults' must be a list of config names, like [esm2_base]; got " +
              node_str(defaults));
    apply_rest();
    return;
  }
  bool self_done = false;
  for (const auto& item : defaults) {
    if (!item.IsScalar()) {
      probs.add(where(source, item.Mark()) +
                ": 'defaults' entries must be config names (config groups such as "
                "'- model: esm2' are not supported); got " +
                node_str(item));
      continue;
    }
    std::string name = trim(item.Scalar());
    if (name == "_self_") {
      if (!self_done) apply_rest();
      self_done = true;
      continue;
    }
    if (dir.empty()) {
      fail(source, ": 'defaults' lists '", name, "' but no config directory was given");
    }
    compose_file(f, dir, name, stack,
                 " (listed in 'defaults' of " + where(source, item.Mark()) + ")", probs);
  }
  if (!self_done) apply_rest();
}

bool valid_key_syntax(const std::string& key) {
  if (key.empty()) return false;
  for (const auto& part : split(key, '.')) {
    if (part.empty()) return false;
  }
  for (char c : key) {
    if (std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A recipe's value text as ours (RecipeSpelling::values); false when it is none of theirs.
bool map_recipe_value(const RecipeSpelling& r, std::string& text) {
  if (r.values.empty()) return true;
  for (const auto& [from, to] : r.values)
    if (lower(trim(text)) == from) {
      text = to;
      return true;
    }
  return false;
}

std::string recipe_value_problem(const RecipeSpelling& r, const std::string& key, const std::string& got) {
  std::vector<std::string> theirs;
  for (const auto& v : r.values) theirs.push_back(v.first);
  return "'" + key + "' (the recipes' name for " + r.key + ") takes " + join(theirs, " or ") + ", got '" + got + "'";
}

void apply_override(Flat& f, const Schema& schema, const std::string& ov, Problems& probs) {
  const std::string origin = "override '" + ov + "'";
  std::string s = trim(ov);
  if (starts_with(s, "~")) {
    std::string key = trim(s.substr(1, s.find('=') == std::string::npos ? std::string::npos
                                                                          : s.find('=') - 1));
    if (!valid_key_syntax(key)) {
      probs.add("malformed " + origin + ": expected ~dotted.key");
      return;
    }
    if (!schema.find(key) && !schema.is_section(key)) {
      probs.add_unknown_key(schema, key, origin);
      return;
    }
    f.erase(key);
    erase_under(f, key);  // back to the defaults
    return;
  }
  if (starts_with(s, "++")) {
    s = s.substr(2);
  } else if (starts_with(s, "+")) {
    s = s.substr(1);
  }
  size_t eq = s.find('=');
  if (eq == std::string::npos) {
    probs.add("malformed " + origin + ": expected dotted.key=value (e.g. optimizer.lr=1e-3)");
    return;
  }
  std::string key = trim(s.substr(0, eq));
  std::string text = trim(s.substr(eq + 1));
  if (!valid_key_syntax(key)) {
    probs.add("malformed " + origin + ": '" + key + "' is not a dotted key like optimizer.lr");
    return;
  }
  // The value is parsed as its key takes it; a recipe spelling's, as the key of ours it stands
  // for (resolve() then reads the spelling as that key).
  const KeySpec* spec = schema.find(key);
  if (!spec && !schema.is_section(key))
    if (const RecipeSpelling* r = schema.recipe_spelling(key); r && !r->key.empty()) spec = schema.find(r->key);
  YAML::Node value;
  if (spec && (spec->type == Type::String || spec->type == Type::Enum)) {
    // Strings are taken literally unless quoted; `null` or `~` mean the empty string. A list
    // key also takes a YAML list ([a.fa, b.fa]).
    if (spec->string_list && !text.empty() && text[0] == '[') {
      try {
        value = YAML::Load(text);
      } catch (const YAML::Exception& e) {
        probs.add("cannot parse the value in " + origin + ": " + e.msg);
        return;
      }
    } else if (!text.empty() && (text[0] == '\'' || text[0] == '"')) {
      try {
        value = YAML::Load(text);
      } catch (const YAML::Exception&) {
        value = YAML::Node();
      }
      if (!value.IsScalar()) value = YAML::Node(text);
    } else if (text == "null" || text == "~") {
      value = YAML::Node(YAML::NodeType::Null);
    } else {
      value = YAML::Node(text);
    }
  } else if (!spec && !schema.is_section(key)) {
    value = YAML::Node(text);  // reported as unknown while resolving
  } else if (text.empty()) {
    value = YAML::Node(text);
  } else {
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      probs.add("cannot parse the value in " + origin + ": " + e.msg);
      return;
    }
  }
  put(f, key, value, origin, "", probs);
}

Config resolve(const Schema& schema, const Flat& f, Problems& probs) {
  Config cfg(schema);
  std::vector<std::pair<const std::string*, const Entry*>> order;
  for (const auto& [path, e] : f) order.push_back({&path, &e});
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second->seq < b.second->seq; });
  for (const auto& [path_ptr, e_ptr] : order) {
    const std::string& path = *path_ptr;
    const Entry& e = *e_ptr;
    if (const KeySpec* spec = schema.find(path)) {
      Value v;
      std::string err;
      if (convert(e.node, *spec, v, err)) {
        cfg.set(path, std::move(v), e.origin);
      } else {
        probs.add(err + " (" + e.origin + ")");
      }
    } else if (schema.is_section(path)) {
      if (!is_empty_mapping(e.node)) {
        probs.add("config key '" + path + "' is a section (with keys " +
                  join(schema.children(path), ", ") + "), not a value; got " + node_str(e.node) +
                  " (" + e.origin + ")");
      }
    } else if (const RecipeSpelling* r = schema.recipe_spelling(path)) {
      // (an override or a config file written with the recipes' names; each is noted, with
      // where it came from, for the command to print)
      if (r->ignored) {
        cfg.add_note("ignored: '" + path + "' (" + e.origin + "): " + r->note);
        continue;
      }
      if (r->key.empty()) {
        probs.add("'" + path + "' is the recipes' key; " + r->note + " (" + e.origin + ")");
        continue;
      }
      YAML::Node node = e.node;
      if (!r->values.empty() && node.IsNull()) {
        // (a Hydra null, as the recipes' YAMLs write for "not given": ours keeps its value)
        cfg.add_note("ignored: '" + path + "' (" + e.origin + "): null is not given; " + r->key +
                     " keeps its value");
        continue;
      }
      if (!r->values.empty()) {
        std::string text = node.IsScalar() ? node.Scalar() : node_str(node);
        const std::string given = text;
        if (!node.IsScalar() || !map_recipe_value(*r, text)) {
          probs.add(recipe_value_problem(*r, path, given) + " (" + e.origin + ")");
          continue;
        }
        node = YAML::Node(text);
      }
      Value v;
      std::string err;
      if (convert(node, *schema.find(r->key), v, err)) {
        cfg.add_note("read '" + path + "' (" + e.origin + ", the recipes' name) as " + r->key + "=" + value_str(v) +
                     (r->note.empty() ? "" : ": " + r->note));
        cfg.set(r->key, std::move(v), e.origin + " as " + r->key);
      } else
        probs.add(err + " (" + e.origin + ", the recipes' name for " + r->key + ")");
    } else {
      probs.add_unknown_key(schema, path, e.origin);
    }
  }
  return cfg;
}

[[noreturn]] void throw_problems(const std::string& what, const Problems& probs) {
  if (probs.list.size() == 1) throw Error(probs.list[0]);
  std::string msg = what + ": " + std::to_string(probs.list.size()) + " problems:";
  const size_t max_shown = Problems::kMaxShown;
  for (size_t i = 0; i < probs.list.size() && i < max_shown; ++i) msg += "\n  " + probs.list[i];
  if (probs.list.size() > max_shown) {
    msg += "\n  ... and " + std::to_string(probs.list.size() - max_shown) + " more";
  }
  throw Error(msg);
}

Config finish(const Schema& schema, Flat& f, const std::vector<std::string>& overrides,
              Problems& probs, const std::string& what) {
  for (const auto& ov : overrides) apply_override(f, schema, ov, probs);
  Config cfg = resolve(schema, f, probs);
  if (!probs.list.empty()) throw_problems(what, probs);
  return cfg;
}

}  // namespace

Config load(const Schema& schema, const std::string& dir, const std::string& name,
            const std::vector<std::string>& overrides) {
  Flat f;
  Problems probs;
  std::vector<std::string> stack;
  compose_file(f, dir, name, stack, "", probs);
  return finish(schema, f, overrides, probs, "config '" + strip_ext(name) + "'");
}

Config load_string(const Schema& schema, const std::string& yaml,
                   const std::vector<std::string>& overrides, const std::string& dir,
                   const std::string& source_name) {
  Flat f;
  Problems probs;
  std::vector<std::string> stack;
  compose_node(f, parse_yaml(yaml, source_name), source_name, dir, stack, probs);
  return finish(schema, f, overrides, probs, source_name);
}

std::vector<std::string> list_configs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    auto ext = e.path().extension().string();
    if (ext == ".yaml" || ext == ".yml") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace biofm::config
