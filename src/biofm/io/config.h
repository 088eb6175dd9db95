// Hydra-style YAML configs: a schema of typed keys, composition through `defaults:`, dotted
// command-line overrides, and validation whose errors name the key.
//
//   configs/child.yaml            defaults: [base]        # merged first, in list order
//                                 optimizer: {lr: 1e-3}   # then this file on top (deep merge)
//   overrides                     optimizer.betas=[0.9,0.95] model.config.hidden_size=256
//
// A key is a dotted path ("model.config.hidden_size"); its sections ("model", "model.config")
// are implied by the keys of the schema. Files may nest maps or write dotted keys directly.
// `_self_` in a defaults list places the file's own keys there (default: after all entries).
// Override values are YAML (1e-3, true, [0.9,0.95], {lr: 1e-3} for a section); for string
// keys the text is taken literally unless quoted, and null/~ mean "". Later overrides win;
// `+key=v` is the same as `key=v`; `~key` puts a key (or section) back to its default.
// Every problem found (unknown keys with the nearest valid one, bad types, bad enum values,
// values out of range) is gathered into one biofm::Error; nothing half-loaded is returned.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace biofm::config {

enum class Type : uint8_t { Int, Float, Bool, String, Enum, FloatList };
const char* type_name(Type t);  // "an int", "a float", "a bool", "a string", ...

// Int -> int64_t, Float -> double, Bool -> bool, String and Enum -> std::string,
// FloatList -> std::vector<double>.
using Value = std::variant<int64_t, double, bool, std::string, std::vector<double>>;

// Bounds for Int and Float keys and for every element of a FloatList.
struct Range {
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;
  bool contains(double v) const;
  std::string str() const;  // "> 0", ">= 1", "in [0, 1)", "<= 5"
  bool empty() const { return !lo && !hi; }
};
Range gt(double lo);                     // (lo, inf)
Range ge(double lo);                     // [lo, inf)
Range closed(double lo, double hi);      // [lo, hi]
Range half_open(double lo, double hi);   // [lo, hi)
Range open(double lo, double hi);        // (lo, hi)

struct KeySpec {
  std::string key;  // full dotted path
  Type type = Type::String;
  Value default_value;
  std::vector<std::string> choices;  // Enum: the allowed values ("" may be one)
  Range range;                        // Int, Float, FloatList elements
  int list_size = -1;                 // FloatList: required length; -1 = any
  bool whole_numbers = false;         // FloatList: every element a whole number (layer indices)
  // FloatList of 1-indexed layer numbers (fp8_layers): whole, at least 1, none listed twice; the
  // upper end (the model's layers) is checked where the model is known.
  bool layer_numbers = false;
  // String keys only: a YAML list of strings is accepted too and stored joined with ','
  // (for inputs that take a comma-separated list, like dataset.path). Entries may not hold ','.
  bool string_list = false;
  // Names users reach for out of habit (other frameworks); used only to suggest this key.
  // "learning_rate" matches the last component in any section; "adamw_kwargs.lr" a full path.
  std::vector<std::string> aliases;
  std::string help;
};

// A key as the BioNeMo recipes spell it (their Hydra configs and READMEs), so that their
// command lines run: read as one of our keys (`key`, with the recipe's value texts mapped to ours
// where they differ), accepted with no effect (`ignored`, the note says why), or refused with a
// note that says what to write instead (no `key`, not ignored).
struct RecipeSpelling {
  std::string recipe_key;  // exact dotted key; "wandb.*" stands for every key under wandb
  std::string key;         // ours, or empty
  std::vector<std::pair<std::string, std::string>> values;  // recipe value text -> ours; empty: as is
  std::string note;
  bool ignored = false;
};

class Schema {
 public:
  // Checks that the key is new, does not collide with a section, and that the default has the
  // right type and lies in range; a broken schema is a programming error and throws.
  void add(KeySpec spec);

  const KeySpec* find(const std::string& key) const;  // nullptr when not a leaf key
  bool is_section(const std::string& key) const;      // "" is the root section
  size_t index(const std::string& key) const;         // throws for an unknown key
  const std::vector<KeySpec>& keys() const { return keys_; }
  // Direct children of a section (leaf and section names), in the order first declared.
  const std::vector<std::string>& children(const std::string& section) const;

  // The valid leaf key nearest to `unknown`: edit distance on the whole path and on the last
  // component (same section preferred), with aliases and initials ("learning_rate" -> "lr");
  // empty when no key is near ("foo.bar").
  std::string suggest(const std::string& unknown) const;
  // "; did you mean 'KEY'?" for an error message, or "" when suggest() has nothing near.
  std::string did_you_mean(const std::string& unknown) const;

  // The recipes' spellings (RecipeSpelling). Lookup: the exact key, else its nearest "section.*".
  void add_recipe_spelling(RecipeSpelling r);
  const RecipeSpelling* recipe_spelling(const std::string& key) const;

  // Every key as `--help` lists it: "  optimizer.lr  float > 0, default 0.0004\n" and its help
  // on the next line, indented.
  std::string describe() const;

 private:
  std::vector<KeySpec> keys_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::vector<std::string>> children_;  // section -> child names
  std::vector<RecipeSpelling> recipe_spellings_;
};

// A complete set of validated values, one per schema key. The schema must outlive it.
class Config {
 public:
  explicit Config(const Schema& schema);  // every key at its default

  const Schema& schema() const { return *schema_; }
  const Value& get(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;  // String and Enum keys
  const std::vector<double>& get_float_list(const std::string& key) const;

  // Sets a value of the key's type (an int64_t is accepted for a Float key). Type and enum
  // membership are checked; ranges are not (see check_ranges).
  void set(const std::string& key, Value v, std::string origin = "set");
  // Where a value came from: "default", "configs/x.yaml:12", "override 'optimizer.lr=1e-3'".
  const std::string& origin(const std::string& key) const;
  // Messages for values outside their declared range (empty when all are fine).
  std::vector<std::string> check_ranges() const;

  // Nested YAML in schema order; floats written so that they read back bit-exactly. `header`
  // lines (if any) come first as comments.
  std::string to_yaml(const std::string& header = "") const;

  bool operator==(const Config& other) const { return values_ == other.values_; }

  // What loading read the recipes' spellings as, or ignored of them, in config files and
  // overrides alike ("read 'x' (file:line, ...) as ...", "ignored: 'y' (override 'y=1'): ..."):
  // for the command to print once.
  const std::vector<std::string>& notes() const { return notes_; }
  void add_note(std::string note) { notes_.push_back(std::move(note)); }

 private:
  const Schema* schema_;
  std::vector<Value> values_;
  std::vector<std::string> origins_;
  std::vector<std::string> notes_;
};

// Loads `dir/name.yaml`, composes its defaults, applies the overrides, validates. A missing
// config throws listing the configs available in `dir`.
Config load(const Schema& schema, const std::string& dir, const std::string& name,
            const std::vector<std::string>& overrides = {});
// The same from YAML text. A `defaults:` list in it is looked up in `dir` (an error if empty).
Config load_string(const Schema& schema, const std::string& yaml,
                   const std::vector<std::string>& overrides = {}, const std::string& dir = "",
                   const std::string& source_name = "<string>");

// Config names (file stems of *.yaml / *.yml) in a directory, sorted.
std::vector<std::string> list_configs(const std::string& dir);

// Levenshtein distance (insert, delete, substitute each cost 1) between the first 128
// characters of each: it serves did-you-mean suggestions, where a longer name is near nothing
// and the full O(length x length) distance of a huge input would only cost time.
size_t edit_distance(std::string_view a, std::string_view b);
// Shortest decimal that reads back as the same double, always with a '.' or an exponent
// ("1.0", "0.0004", "1.0e-08") so that YAML readers see a float.
std::string format_float(double v);
// A YAML scalar for a string: plain when unambiguous, otherwise double-quoted with escapes.
std::string yaml_quote(const std::string& s);

}  // namespace biofm::config
