// AdamW applied one layer ahead (ops.adamw_ahead, AdamW::apply_ahead_in): each step's update
// is owed after step() and applied part by part in the model's next pass. On the CPU backend
// the parts run inline (no side stream), so these tests check the bookkeeping: every part is
// applied exactly once, before anything reads it, and gradients are zeroed in time. The
// results must equal the update applied whole, bit for bit. (tests/cuda/side_stream_test.cpp
// runs the same on a GPU, with the parts on the side stream.)
#include <gtest/gtest.h>

#include <cmath>

#include "biofm/train/config.h"
#include "biofm/train/step.h"
#include "biofm/train/trainer.h"
#include "models/tiny_models.h"

using namespace biofm;

namespace {

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  const Tensor x = a.to(DType::F32), y = b.to(DType::F32);
  int64_t differ = 0;
  for (int64_t i = 0; i < x.numel(); ++i) differ += x.f32()[i] != y.f32()[i];
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << x.numel() << " elements differ";
}

// A copy of b whose tokens carry no label (TrainStep skips such a micro batch).
Batch without_labels(const Batch& b) {
  Batch c = b;
  c.labels = Tensor::from_i32({b.num_rows()}, std::vector<int32_t>(size_t(b.num_rows()), -100));
  c.num_label_tokens = 0;
  return c;
}

void train_both(const std::string& family) {
  SCOPED_TRACE(family);
  const ModelFamily& f = family_named(family);
  std::unique_ptr<LanguageModel> whole = f.build(testkit::tiny_shape(f, 3), Device::CPU, BuildOptions{});
  std::unique_ptr<LanguageModel> ahead = f.build(testkit::tiny_shape(f, 3), Device::CPU, BuildOptions{});
  whole->params().init(11);
  ahead->params().init(11);
  AdamWConfig ac;
  ac.lr = 3e-3f;  // (large enough that every step changes every parameter)
  AdamW opt_whole(whole->params(), ac), opt_ahead(ahead->params(), ac);
  opt_ahead.apply_ahead_in(*ahead);
  TrainStep step_whole(*whole, opt_whole), step_ahead(*ahead, opt_ahead);

  SequenceDataset data = testkit::bundled_data(f);
  auto src = f.batches(testkit::small_batches(), data);
  const Batch held_out = src->next();
  for (int s = 0; s < 5; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    std::vector<Batch> micro{src->next(), src->next()};
    if (s == 1) micro.insert(micro.begin(), without_labels(micro[0]));  // skipped first: the second applies the parts
    if (s == 3) micro = {without_labels(micro[0])};  // no forward at all: step() applies them
    step_whole.run(micro, 1e-3);
    step_ahead.run(micro, 1e-3);
    EXPECT_TRUE(opt_ahead.update_owed());
    EXPECT_EQ(step_ahead.read_loss().label_count, step_whole.read_loss().label_count);
    if (s != 3) EXPECT_EQ(step_ahead.read_loss().mean, step_whole.read_loss().mean);
    EXPECT_EQ(opt_ahead.read_grad_norm(), opt_whole.read_grad_norm());
    if (s == 2) {  // a validation pass between steps sees the updated weights
      const LossSums a = ahead->evaluate(held_out, false), w = whole->evaluate(held_out, false);
      EXPECT_EQ(a.loss_sum, w.loss_sum);
      EXPECT_FALSE(opt_ahead.update_owed()) << "evaluate must apply the owed update first";
    }
  }
  // What a checkpoint or an export reads: settled first.
  ahead->settle_weights();
  EXPECT_FALSE(opt_ahead.update_owed());
  EXPECT_EQ(opt_ahead.steps_taken(), opt_whole.steps_taken());
  expect_same(ahead->params().flat(), whole->params().flat(), "parameters");
  for (const char* k : {"exp_avg", "exp_avg_sq"}) expect_same(opt_ahead.state().at(k), opt_whole.state().at(k), k);
  // The gradients were zeroed as each part was applied (whole: they still hold the last step's).
  Tensor zero = Tensor::zeros({ahead->params().numel()}, DType::F32);
  expect_same(ahead->params().grad_flat(), zero, "gradients after the parts were applied");
}

}  // namespace

TEST(AdamWAhead, TrainsAsTheUpdateAppliedWhole) {
  train_both("esm2");
  train_both("llama");
}

TEST(AdamWAhead, AppliesOnlyWhereItCan) {
  const ModelFamily& f = family_named("esm2");
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f), Device::CPU, BuildOptions{});
  TrainConfig cfg;
  AdamWConfig ac;
  {
    AdamW opt(m->params(), ac);
    EXPECT_TRUE(apply_adamw_ahead(cfg, opt, *m, /*one_process=*/true));
    EXPECT_FALSE(opt.update_owed());
  }
  m->set_weight_update(nullptr);
  {
    AdamW opt(m->params(), ac);
    EXPECT_FALSE(apply_adamw_ahead(cfg, opt, *m, /*one_process=*/false)) << "several processes: ddp/zero/fsdp";
    cfg.ops.adamw_ahead = false;
    EXPECT_FALSE(apply_adamw_ahead(cfg, opt, *m, true)) << "ops.adamw_ahead=false";
  }
  cfg.ops.adamw_ahead = true;
  ac.offload = true;
  AdamW offloaded(m->params(), ac);
  EXPECT_FALSE(apply_adamw_ahead(cfg, offloaded, *m, true)) << "an offloaded optimizer updates on the host";
  EXPECT_THROW(offloaded.apply_ahead_in(*m), Error);
}

// Loading an optimizer state (checkpoint resume: load_state, or moment() for a streamed load)
// replaces an update still owed instead of applying it onto the loaded parameters; the next step
// then zeroes the gradients itself.
TEST(AdamWAhead, ALoadedStateReplacesAnUpdateStillOwed) {
  const ModelFamily& f = family_named("esm2");
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f), Device::CPU, BuildOptions{});
  m->params().init(3);
  AdamW opt(m->params(), AdamWConfig{});
  opt.apply_ahead_in(*m);
  TrainStep step(*m, opt);
  SequenceDataset data = testkit::bundled_data(f);
  auto src = f.batches(testkit::small_batches(), data);
  for (int how = 0; how < 2; ++how) {
    SCOPED_TRACE(how == 0 ? "moment()" : "load_state()");
    step.run({src->next()}, 1e-3);
    ASSERT_TRUE(opt.update_owed());
    const Tensor before = m->params().flat().clone();
    if (how == 0)
      (void)opt.moment("exp_avg");
    else
      opt.load_state(opt.state(), opt.steps_taken());
    EXPECT_FALSE(opt.update_owed());
    expect_same(m->params().flat(), before, "parameters (the owed update was not applied)");
  }
  m->params().grad_flat().fill_(std::nanf(""));  // (what the step must zero before it adds)
  step.run({src->next()}, 1e-3);
  EXPECT_TRUE(std::isfinite(opt.read_grad_norm())) << "the step after a load zeroes the gradients";
}
