#include "biofm/train/schedule.h"

#include <gtest/gtest.h>

#include "biofm/core/error.h"

using namespace biofm;

TEST(TrainSchedule, WarmupLinearDecayToTenPercentAtNinetyPercent) {
  ScheduleSpec s{"warmup_linear", 10, 100, 0.9, 0.1};
  EXPECT_DOUBLE_EQ(lr_multiplier(s, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_multiplier(s, 5), 0.5);
  EXPECT_DOUBLE_EQ(lr_multiplier(s, 10), 1.0);
  EXPECT_NEAR(lr_multiplier(s, 50), 1.0 - 0.9 * 40.0 / 80.0, 1e-12);
  EXPECT_NEAR(lr_multiplier(s, 89), 1.0 - 0.9 * 79.0 / 80.0, 1e-12);
  EXPECT_DOUBLE_EQ(lr_multiplier(s, 90), 0.1);
  EXPECT_DOUBLE_EQ(lr_multiplier(s, 99), 0.1);
}

TEST(TrainSchedule, WarmupCosine) {
  ScheduleSpec s{"warmup_cosine", 10, 110, 1.0, 0.02};
  EXPECT_DOUBLE_EQ(lr_multiplier(s, 10), 1.0);
  EXPECT_NEAR(lr_multiplier(s, 60), 0.02 + 0.98 * 0.5, 1e-12);
  EXPECT_NEAR(lr_multiplier(s, 109), 0.02, 1e-3);
  EXPECT_DOUBLE_EQ(lr_multiplier(s, 110), 0.02);
}

TEST(TrainSchedule, UnknownTypeFails) {
  ScheduleSpec s{"exponential", 0, 10, 1.0, 0.1};
  EXPECT_THROW(lr_multiplier(s, 3), Error);
}

// A warmup as long as the run or longer is noted (the learning rate never reaches its peak).
TEST(TrainSchedule, WarmupLongerThanTheRunIsNoted) {
  ScheduleSpec s;
  s.warmup_steps = 2000;
  s.total_steps = 20;
  EXPECT_EQ(warmup_note(s), "scheduler.warmup_steps=2000 >= num_train_steps=20: the learning rate stays in warmup for "
                            "the whole run (at most 0.95% of optimizer.lr); lower scheduler.warmup_steps");
  s.warmup_steps = 20;
  EXPECT_NE(warmup_note(s), "");
  s.warmup_steps = 19;
  EXPECT_EQ(warmup_note(s), "");
  s.warmup_steps = 0;
  EXPECT_EQ(warmup_note(s), "");
}
