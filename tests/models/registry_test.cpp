// The model registry: lookups by family and by model_type, and that every registered family
// builds, trains one step and round-trips through a Hugging Face directory.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "biofm/core/error.h"
#include "biofm/data/dataset.h"
#include "biofm/models/registry.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/step.h"
#include "models/tiny_models.h"

using namespace biofm;

using testkit::tiny_shape;

TEST(Registry, LooksUpFamiliesByNameAndModelType) {
  EXPECT_EQ(family_named("esm2").hf_model_type, "esm");
  EXPECT_EQ(family_named("llama").objective, Objective::CausalLM);
  try {
    family_named("amplify");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: esm2, llama"), std::string::npos) << e.what();
  }
  EXPECT_EQ(&family_of_dir(std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/esm2_tiny"), &family_named("esm2"));
  EXPECT_EQ(&family_of_dir(std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/llama_tiny"), &family_named("llama"));
}

TEST(Registry, FamilyConfigRulesNameTheKeys) {
  std::vector<std::string> errs;
  ModelShape m;
  m.hidden_act = "silu";
  family_named("esm2").check_config(m, DataOptions{}, errs);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("model.config.hidden_act"), std::string::npos);
  errs.clear();
  DataOptions d;
  d.stride = d.max_seq_length;
  family_named("llama").check_config(tiny_shape(family_named("llama")), d, errs);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("dataset.stride"), std::string::npos);
}

// Every family: build, one training step on its own batches lowers nothing to NaN and changes
// the parameters; the Hugging Face export loads back (by model_type) with the same logits.
TEST(Registry, EveryFamilyTrainsAndRoundTrips) {
  for (const ModelFamily* f : model_families()) {
    SCOPED_TRACE(f->name);
    BuildOptions o;
    o.seed = 7;
    std::unique_ptr<LanguageModel> m = f->build(tiny_shape(*f), Device::CPU, o);
    EXPECT_EQ(m->family(), f->name);
    SequenceDataset data = testkit::bundled_data(*f);
    auto src = f->batches(testkit::small_batches(), data);
    AdamW opt(m->params(), AdamWConfig{});
    TrainStep step(*m, opt);
    const Tensor before = m->params().flat().clone();
    step.run({src->next()}, 1e-3);
    EXPECT_TRUE(std::isfinite(step.read_mean_loss()));
    EXPECT_GT(step.label_tokens(), 0);
    const Tensor& after = m->params().flat();
    int64_t changed = 0;
    for (int64_t i = 0; i < after.numel(); ++i) changed += after.f32()[i] != before.f32()[i];
    EXPECT_GT(changed, after.numel() / 2);

    const std::string dir = testing::TempDir() + "/registry_roundtrip_" + f->name;
    std::filesystem::remove_all(dir);
    m->save_hf_dir(dir);
    std::unique_ptr<LanguageModel> back = load_model_dir(dir, Device::CPU);
    EXPECT_EQ(back->family(), f->name);
    Batch b = src->next();
    Tensor a = m->logits(b), c = back->logits(b);
    ASSERT_EQ(a.numel(), c.numel());
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.f32()[i], c.f32()[i]) << i;
  }
}
