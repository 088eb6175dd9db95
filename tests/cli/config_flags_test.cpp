// cli/config_flags: the command line's config overrides are checked against the training config
// schema on their own (a mistake is a usage error), and --help lists that schema's keys.
#include "biofm/cli/config_flags.h"

#include <gtest/gtest.h>

#include "biofm/cli/flags.h"
#include "biofm/io/config.h"
#include "biofm/train/config.h"

using namespace biofm;

TEST(ConfigFlags, OverridesAreCheckedAsUsage) {
  check_config_overrides({});
  check_config_overrides({"num_train_steps=7", "optimizer.lr=1e-3", "+seed=3", "~optimizer", "dataset.path=x.fasta",
                          "optimizer={lr: 1e-3}", "dataset.val_path="});
  // (what only a composed config can show, e.g. a missing dataset.path, is left to loading)
  const auto usage_message = [](std::vector<std::string> ov) {
    try {
      check_config_overrides(ov);
    } catch (const UsageError& e) {
      return std::string(e.what());
    } catch (const Error& e) {
      return "not a usage error: " + std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(usage_message({"foo.bar=1"}).find("unknown config key 'foo.bar'"), std::string::npos);
  EXPECT_EQ(usage_message({"foo.bar=1"}).find("did you mean"), std::string::npos) << "near no key: nothing to offer";
  EXPECT_NE(usage_message({"optimizer.lrr=1"}).find("did you mean 'optimizer.lr'"), std::string::npos);
  EXPECT_NE(usage_message({"num_train_steps=abc"}).find("config key 'num_train_steps' expects an int"), std::string::npos);
  EXPECT_NE(usage_message({"num_train_steps=-3"}).find("num_train_steps"), std::string::npos);
  EXPECT_NE(usage_message({"device=gpu"}).find("config key 'device' must be one of"), std::string::npos);
  EXPECT_NE(usage_message({"optimizer.lr"}).find("malformed override"), std::string::npos);
  const std::string two = usage_message({"optimizer.lrr=1", "seed=x"});
  EXPECT_EQ(two.rfind("the config overrides: 2 problems:", 0), 0u) << two;
}

TEST(ConfigFlags, HelpListsEverySchemaKey) {
  const std::string h = config_keys_help();
  EXPECT_EQ(h.rfind("config keys (key=value overrides", 0), 0u) << h;
  for (const config::KeySpec& k : train_config_schema().keys()) {
    const size_t at = h.find("\n  " + k.key + "  ");
    ASSERT_NE(at, std::string::npos) << k.key;
    if (!k.help.empty()) EXPECT_NE(h.find("\n      " + k.help + "\n", at), std::string::npos) << k.key;
  }
  EXPECT_NE(h.find("\n  seed  int >= 0, default 42\n      seed of the counter-based RNG"), std::string::npos) << h;
  EXPECT_NE(h.find("\n  grad_acc_steps  int >= 1, default 1\n"), std::string::npos) << h;  // no int32 bound shown
  EXPECT_NE(h.find("\n  optimizer.betas  list of 2 floats"), std::string::npos) << h;
}
