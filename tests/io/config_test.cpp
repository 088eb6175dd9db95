// The generic config layer: composition, overrides, schema validation, YAML rendering.
#include "biofm/io/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "biofm/core/error.h"

using namespace biofm;
using namespace biofm::config;
namespace fs = std::filesystem;

namespace {

const Schema& test_schema() {
  static const Schema s = [] {
    Schema s;
    s.add({.key = "seed", .type = Type::Int, .default_value = int64_t(42), .range = ge(0)});
    s.add({.key = "name", .type = Type::String, .default_value = std::string("run")});
    s.add({.key = "precision", .type = Type::Enum, .default_value = std::string("fp32"),
           .choices = {"fp32", "bf16", "bf16-mixed"}});
    s.add({.key = "rope", .type = Type::Enum, .default_value = std::string(""),
           .choices = {"", "llama3"}});
    s.add({.key = "optimizer.lr", .type = Type::Float, .default_value = 4e-4, .range = gt(0),
           .aliases = {"learning_rate"}});
    s.add({.key = "optimizer.betas", .type = Type::FloatList,
           .default_value = std::vector<double>{0.9, 0.98}, .range = half_open(0, 1),
           .list_size = 2});
    s.add({.key = "optimizer.weight_decay", .type = Type::Float, .default_value = 0.01,
           .range = ge(0)});
    s.add({.key = "model.config.hidden_size", .type = Type::Int, .default_value = int64_t(320),
           .range = gt(0)});
    s.add({.key = "model.config.num_attention_heads", .type = Type::Int,
           .default_value = int64_t(20), .range = gt(0)});
    s.add({.key = "model.config.token_dropout", .type = Type::Bool, .default_value = true});
    s.add({.key = "model.family", .type = Type::Enum, .default_value = std::string("esm2"),
           .choices = {"esm2", "llama"}});
    s.add({.key = "steps", .type = Type::Int, .default_value = int64_t(1000), .range = gt(0)});
    return s;
  }();
  return s;
}

// A fresh directory of YAML files for one test.
struct ConfigDir {
  fs::path dir;
  explicit ConfigDir(const std::string& tag) {
    dir = fs::temp_directory_path() /
          ("biofm_cfg_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~ConfigDir() { fs::remove_all(dir); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
  }
  std::string path() const { return dir.string(); }
};

// The message of the biofm::Error that `f` throws ("" if it does not throw).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

}  // namespace

TEST(ConfigSchema, DefaultsWhenEmpty) {
  Config c = load_string(test_schema(), "");
  EXPECT_EQ(c.get_int("seed"), 42);
  EXPECT_EQ(c.get_string("name"), "run");
  EXPECT_DOUBLE_EQ(c.get_float("optimizer.lr"), 4e-4);
  EXPECT_EQ(c.get_float_list("optimizer.betas"), (std::vector<double>{0.9, 0.98}));
  EXPECT_TRUE(c.get_bool("model.config.token_dropout"));
  EXPECT_EQ(c.origin("seed"), "default");
  EXPECT_EQ(c, Config(test_schema()));
}

TEST(ConfigSchema, RejectsBrokenSchemas) {
  Schema s;
  s.add({.key = "a.b", .type = Type::Int, .default_value = int64_t(1)});
  EXPECT_THROW(s.add({.key = "a.b", .type = Type::Int, .default_value = int64_t(1)}), Error);
  EXPECT_THROW(s.add({.key = "a", .type = Type::Int, .default_value = int64_t(1)}), Error);
  EXPECT_THROW(s.add({.key = "a.b.c", .type = Type::Int, .default_value = int64_t(1)}), Error);
  EXPECT_THROW(s.add({.key = "x", .type = Type::Int, .default_value = std::string("1")}), Error);
  EXPECT_THROW(s.add({.key = "y", .type = Type::Int, .default_value = int64_t(-1), .range = ge(0)}),
               Error);
  EXPECT_THROW(s.add({.key = "z", .type = Type::Enum, .default_value = std::string("q"),
                      .choices = {"a", "b"}}),
               Error);
  EXPECT_TRUE(s.is_section("a"));
  EXPECT_TRUE(s.is_section(""));
  EXPECT_FALSE(s.is_section("a.b"));
}

TEST(ConfigCompose, DefaultsMergedInOrderThenSelf) {
  ConfigDir d("order");
  d.write("a.yaml", "seed: 1\nname: from_a\noptimizer:\n  lr: 0.1\n  weight_decay: 0.5\n");
  d.write("b.yaml", "seed: 2\noptimizer:\n  lr: 0.2\n");
  d.write("child.yaml", "defaults: [a, b]\nseed: 3\n");
  Config c = load(test_schema(), d.path(), "child");
  EXPECT_EQ(c.get_int("seed"), 3);                       // the file itself wins
  EXPECT_DOUBLE_EQ(c.get_float("optimizer.lr"), 0.2);     // b over a
  EXPECT_DOUBLE_EQ(c.get_float("optimizer.weight_decay"), 0.5);  // deep merge keeps a's key
  EXPECT_EQ(c.get_string("name"), "from_a");
  EXPECT_EQ(c.origin("seed"), (d.dir / "child.yaml").string() + ":2");
  EXPECT_EQ(c.origin("optimizer.lr"), (d.dir / "b.yaml").string() + ":3");

  d.write("rev.yaml", "defaults:\n  - b\n  - a\n");
  Config r = load(test_schema(), d.path(), "rev.yaml");  // the extension is optional
  EXPECT_EQ(r.get_int("seed"), 1);
  EXPECT_DOUBLE_EQ(r.get_float("optimizer.lr"), 0.1);
}

TEST(ConfigCompose, SelfPositionNestingAndCycles) {
  ConfigDir d("self");
  d.write("base.yaml", "seed: 5\nsteps: 7\n");
  d.write("mid.yaml", "defaults: [base]\nsteps: 9\nmodel: {config: {hidden_size: 64}}\n");
  d.write("top.yaml", "defaults: [mid]\nmodel.config.num_attention_heads: 4\n");
  Config c = load(test_schema(), d.path(), "top");
  EXPECT_EQ(c.get_int("seed"), 5);
  EXPECT_EQ(c.get_int("steps"), 9);
  EXPECT_EQ(c.get_int("model.config.hidden_size"), 64);
  EXPECT_EQ(c.get_int("model.config.num_attention_heads"), 4);  // dotted keys in files

  // `_self_` first: the defaults listed after it override this file.
  d.write("selfirst.yaml", "defaults: [_self_, base]\nseed: 99\nname: kept\n");
  Config s = load(test_schema(), d.path(), "selfirst");
  EXPECT_EQ(s.get_int("seed"), 5);
  EXPECT_EQ(s.get_string("name"), "kept");

  d.write("x.yaml", "defaults: [y]\n");
  d.write("y.yaml", "defaults: [x]\n");
  EXPECT_HAS(error_of([&] { load(test_schema(), d.path(), "x"); }), "cycle: x -> y -> x");

  d.write("missing_default.yaml", "defaults: [nope]\n");
  std::string msg = error_of([&] { load(test_schema(), d.path(), "missing_default"); });
  EXPECT_HAS(msg, "config 'nope' not found");
  EXPECT_HAS(msg, "listed in 'defaults' of");

  d.write("group.yaml", "defaults:\n  - model: esm2\n");
  EXPECT_HAS(error_of([&] { load(test_schema(), d.path(), "group"); }), "config groups");
}

TEST(ConfigCompose, ReplacingAndEmptySections) {
  ConfigDir d("sections");
  d.write("base.yaml", "optimizer:\n  lr: 0.3\n  betas: [0.1, 0.2]\n");
  // An empty or null section merges nothing; a list is replaced whole.
  d.write("empty.yaml", "defaults: [base]\noptimizer:\n");
  d.write("empty2.yaml", "defaults: [base]\noptimizer: {}\n");
  d.write("list.yaml", "defaults: [base]\noptimizer:\n  betas: [0.5, 0.6]\n");
  for (const char* name : {"empty", "empty2"}) {
    Config c = load(test_schema(), d.path(), name);
    EXPECT_DOUBLE_EQ(c.get_float("optimizer.lr"), 0.3) << name;
  }
  Config l = load(test_schema(), d.path(), "list");
  EXPECT_EQ(l.get_float_list("optimizer.betas"), (std::vector<double>{0.5, 0.6}));
  EXPECT_DOUBLE_EQ(l.get_float("optimizer.lr"), 0.3);

  d.write("scalar_section.yaml", "optimizer: 3\n");
  std::string msg = error_of([&] { load(test_schema(), d.path(), "scalar_section"); });
  EXPECT_HAS(msg, "config key 'optimizer' is a section");
  EXPECT_HAS(msg, "lr, betas, weight_decay");
}

TEST(ConfigOverride, NestedKeysListsAndStrings) {
  ConfigDir d("ovr");
  d.write("base.yaml", "seed: 1\noptimizer:\n  lr: 0.1\n");
  Config c = load(test_schema(), d.path(), "base",
                  {"optimizer.lr=1e-3", "optimizer.betas=[0.8, 0.95]",
                   "model.config.hidden_size=2_048", "model.config.token_dropout=false",
                   "name=hello world", "precision=bf16-mixed", "seed=1e3", "steps=+5"});
  EXPECT_DOUBLE_EQ(c.get_float("optimizer.lr"), 1e-3);
  EXPECT_EQ(c.get_float_list("optimizer.betas"), (std::vector<double>{0.8, 0.95}));
  EXPECT_EQ(c.get_int("model.config.hidden_size"), 2048);
  EXPECT_FALSE(c.get_bool("model.config.token_dropout"));
  EXPECT_EQ(c.get_string("name"), "hello world");
  EXPECT_EQ(c.get_string("precision"), "bf16-mixed");
  EXPECT_EQ(c.get_int("seed"), 1000);
  EXPECT_EQ(c.get_int("steps"), 5);
  EXPECT_EQ(c.origin("optimizer.lr"), "override 'optimizer.lr=1e-3'");

  // Later overrides win; strings are literal unless quoted; null and "" give empty strings;
  // `+key=` is accepted; `~key` restores the default; a section takes a YAML map.
  Config o = load(test_schema(), d.path(), "base",
                  {"seed=2", "seed=3", "name='a: b'", "rope=null", "+steps=11", "~optimizer.lr",
                   "model={config: {num_attention_heads: 8}}"});
  EXPECT_EQ(o.get_int("seed"), 3);
  EXPECT_EQ(o.get_string("name"), "a: b");
  EXPECT_EQ(o.get_string("rope"), "");
  EXPECT_EQ(o.get_int("steps"), 11);
  EXPECT_DOUBLE_EQ(o.get_float("optimizer.lr"), 4e-4);
  EXPECT_EQ(o.get_int("model.config.num_attention_heads"), 8);
  EXPECT_EQ(load_string(test_schema(), "", {"name="}).get_string("name"), "");
  EXPECT_EQ(load_string(test_schema(), "", {"name=x=y"}).get_string("name"), "x=y");

  EXPECT_HAS(error_of([&] { load_string(test_schema(), "", {"seed"}); }),
             "malformed override 'seed'");
  EXPECT_HAS(error_of([&] { load_string(test_schema(), "", {"optimizer..lr=1"}); }),
             "malformed override");
}

TEST(ConfigUnknownKey, InFileNamesKeyFileAndNearest) {
  ConfigDir d("unknown");
  d.write("bad.yaml", "seed: 1\noptimizer:\n  learning_rate: 1e-3\n");
  std::string msg = error_of([&] { load(test_schema(), d.path(), "bad"); });
  EXPECT_HAS(msg, "unknown config key 'optimizer.learning_rate'; did you mean 'optimizer.lr'?");
  EXPECT_HAS(msg, "bad.yaml:3");

  // Typos, a missing section level, a misspelt section: each gets the intended key.
  auto suggestion = [](const std::string& k) { return test_schema().suggest(k); };
  EXPECT_EQ(suggestion("optimizer.weight_decy"), "optimizer.weight_decay");
  EXPECT_EQ(suggestion("optimizer.learning_rate"), "optimizer.lr");
  EXPECT_EQ(suggestion("optimiser.lr"), "optimizer.lr");
  EXPECT_EQ(suggestion("model.hidden_size"), "model.config.hidden_size");
  EXPECT_EQ(suggestion("hidden_size"), "model.config.hidden_size");
  EXPECT_EQ(suggestion("model.config.num_heads"), "model.config.num_attention_heads");
  EXPECT_EQ(suggestion("sed"), "seed");
  EXPECT_EQ(suggestion("Seed"), "seed");
}

TEST(ConfigUnknownKey, InOverrideAndEveryProblemReported) {
  std::string msg = error_of([] {
    load_string(test_schema(), "seed: 1\n", {"optimizer.learning_rate=1e-3"});
  });
  EXPECT_HAS(msg, "unknown config key 'optimizer.learning_rate'; did you mean 'optimizer.lr'?");
  EXPECT_HAS(msg, "override 'optimizer.learning_rate=1e-3'");

  // Unknown whole sections are reported leaf by leaf; all problems come in one error.
  msg = error_of([] {
    load_string(test_schema(), "optimzer:\n  lr: 1\nsteps: -1\n", {"precision=fp16", "mdl.x=1"});
  });
  EXPECT_HAS(msg, "4 problems");
  EXPECT_HAS(msg, "unknown config key 'optimzer.lr'; did you mean 'optimizer.lr'?");
  EXPECT_HAS(msg, "config key 'steps' must be > 0; got -1");
  EXPECT_HAS(msg, "config key 'precision' must be one of fp32, bf16, bf16-mixed; got 'fp16'");
  EXPECT_HAS(msg, "unknown config key 'mdl.x'");
}

TEST(ConfigValues, BadTypesEnumsAndRangesNameTheKey) {
  auto err = [](const std::string& yaml, std::vector<std::string> ov = {}) {
    return error_of([&] { load_string(test_schema(), yaml, ov, "", "t.yaml"); });
  };
  EXPECT_HAS(err("seed: abc\n"), "config key 'seed' expects an int; got 'abc' (t.yaml:1)");
  EXPECT_HAS(err("seed: 1.5\n"), "config key 'seed' expects an int; got '1.5'");
  EXPECT_HAS(err("seed: [1]\n"), "config key 'seed' expects an int; got [1]");
  EXPECT_HAS(err("", {"optimizer.lr=fast"}), "config key 'optimizer.lr' expects a float; got 'fast'");
  EXPECT_HAS(err("", {"optimizer.lr=nan"}), "expects a float");
  EXPECT_HAS(err("", {"model.config.token_dropout=maybe"}),
             "config key 'model.config.token_dropout' expects a bool (true/false); got 'maybe'");
  std::string e = err("", {"precision=bf16_mixed"});
  EXPECT_HAS(e, "config key 'precision' must be one of fp32, bf16, bf16-mixed; got 'bf16_mixed'");
  EXPECT_HAS(e, "did you mean 'bf16-mixed'?");
  EXPECT_HAS(err("", {"rope=llama2"}), "must be one of \"\", llama3");
  EXPECT_HAS(err("", {"optimizer.lr=0"}), "config key 'optimizer.lr' must be > 0; got 0.0");
  EXPECT_HAS(err("", {"optimizer.lr=-1e-3"}), "must be > 0; got -0.001");
  EXPECT_HAS(err("", {"seed=-1"}), "config key 'seed' must be >= 0; got -1");
  EXPECT_HAS(err("", {"optimizer.betas=[0.9, 1.0]"}),
             "config key 'optimizer.betas' needs every element in [0, 1); element 1 is 1.0");
  EXPECT_HAS(err("", {"optimizer.betas=[0.9]"}),
             "config key 'optimizer.betas' expects a list of 2 floats; got [0.9]");
  EXPECT_HAS(err("", {"optimizer.betas=0.9"}), "expects a list of 2 floats");
  EXPECT_HAS(err("", {"optimizer.betas=[0.9, x]"}), "expects a list of 2 floats");
  EXPECT_HAS(err("", {"name=[a, b]"}), "");  // literal string, fine
  EXPECT_HAS(err("name: [a, b]\n"), "config key 'name' expects a string; got [a, b]");
  EXPECT_HAS(err("seed:\n"), "config key 'seed' expects an int; got null");
  EXPECT_HAS(err("seed: 1\n  bad indent: 2\n"), "t.yaml:2");
  EXPECT_HAS(err("- a\n- b\n"), "must be a mapping");

  // YAML spellings that are accepted.
  Config c = load_string(test_schema(),
                         "seed: 2_000\noptimizer: {lr: 4e-4, betas: [0, .5]}\n"
                         "model: {config: {token_dropout: False, hidden_size: 64.0}}\n");
  EXPECT_EQ(c.get_int("seed"), 2000);
  EXPECT_DOUBLE_EQ(c.get_float("optimizer.lr"), 4e-4);
  EXPECT_EQ(c.get_float_list("optimizer.betas"), (std::vector<double>{0.0, 0.5}));
  EXPECT_FALSE(c.get_bool("model.config.token_dropout"));
  EXPECT_EQ(c.get_int("model.config.hidden_size"), 64);
}

TEST(ConfigMissing, NameListsAvailableConfigs) {
  ConfigDir d("missing");
  d.write("esm2_base.yaml", "seed: 1\n");
  d.write("esm2_sanity.yaml", "defaults: [esm2_base]\n");
  d.write("notes.txt", "not a config\n");
  EXPECT_EQ(list_configs(d.path()), (std::vector<std::string>{"esm2_base", "esm2_sanity"}));
  std::string msg = error_of([&] { load(test_schema(), d.path(), "esm2_sanitty"); });
  EXPECT_HAS(msg, "config 'esm2_sanitty' not found");
  EXPECT_HAS(msg, "did you mean 'esm2_sanity'?");
  EXPECT_HAS(msg, "available configs: esm2_base, esm2_sanity");
  msg = error_of([&] { load(test_schema(), (d.dir / "nope").string(), "x"); });
  EXPECT_HAS(msg, "does not exist");
}

TEST(ConfigYaml, RoundTripsEveryType) {
  Config c(test_schema());
  c.set("seed", int64_t(123456789012));
  c.set("name", std::string("true"));  // needs quotes to stay a string
  c.set("precision", std::string("bf16-mixed"));
  c.set("optimizer.lr", 1.0 / 3.0);
  c.set("optimizer.betas", std::vector<double>{0.9, 0.999});
  c.set("optimizer.weight_decay", int64_t(1));  // ints are accepted for floats
  c.set("model.config.token_dropout", false);
  std::string y = c.to_yaml("resolved config\nsecond line");
  EXPECT_EQ(y.rfind("# resolved config\n# second line\nseed: 123456789012\n", 0), 0u) << y;
  EXPECT_HAS(y, "name: \"true\"\n");
  EXPECT_HAS(y, "rope: \"\"\n");
  EXPECT_HAS(y, "optimizer:\n  lr: 0.3333333333333333\n  betas: [0.9, 0.999]\n"
                "  weight_decay: 1.0\n");
  EXPECT_HAS(y, "model:\n  config:\n    hidden_size: 320\n");
  Config back = load_string(test_schema(), y);
  EXPECT_EQ(back, c);

  for (std::string s : {"", "a: b", "1e3", "x\"y\\z", "line\nbreak", "-dash", "null", "~",
                        "#hash", "  padded ", "runs/esm2_sanity", "yes", "On", "[x]", "{a}",
                        "\x01"}) {
    Config t(test_schema());
    t.set("name", s);
    EXPECT_EQ(load_string(test_schema(), t.to_yaml()).get_string("name"), s)
        << "yaml: " << t.to_yaml();
  }
  EXPECT_THROW(c.set("precision", std::string("fp16")), Error);
  EXPECT_THROW(c.set("seed", 1.5), Error);
  EXPECT_THROW(c.set("nope", int64_t(1)), Error);
}

TEST(ConfigYaml, FloatsReadBackExactly) {
  EXPECT_EQ(format_float(1.0), "1.0");
  EXPECT_EQ(format_float(4e-4), "0.0004");
  EXPECT_EQ(format_float(1e-8), "1.0e-08");
  EXPECT_EQ(format_float(1e20), "1.0e+20");
  EXPECT_EQ(format_float(-2.5), "-2.5");
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(-1, 1);
  std::uniform_int_distribution<int> ex(-300, 300);
  for (int i = 0; i < 2000; ++i) {
    double v = mant(rng) * std::pow(10.0, ex(rng));
    if (!std::isfinite(v)) continue;
    Config c(test_schema());
    c.set("optimizer.weight_decay", std::fabs(v));
    Config back = load_string(test_schema(), c.to_yaml());
    ASSERT_EQ(back.get_float("optimizer.weight_decay"), std::fabs(v)) << c.to_yaml();
  }
}

TEST(ConfigUtil, EditDistanceAndDescribe) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("lr", ""), 2u);
  EXPECT_EQ(edit_distance("abc", "abc"), 0u);
  std::string d = test_schema().describe();
  EXPECT_HAS(d, "optimizer.lr");
  EXPECT_HAS(d, "float > 0, default");
  EXPECT_HAS(d, "fp32|bf16|bf16-mixed");
}
