// range_timer on the clock (the CPU's marks): ranges open only while recording, nest, are summed
// per name in first-seen order, and a window is pending only once every range in it has ended;
// the printed table folds numbered names into one row. (CUDA events: tests/cuda/range_timer_test.cpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "biofm/core/profiling.h"
#include "biofm/core/range_timer.h"

using namespace biofm;

namespace {
void busy(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
}  // namespace

TEST(RangeTimer, SumsNestedRangesPerNameWhileRecording) {
  range_timer::set_enabled(true, /*gpu=*/false);
  EXPECT_EQ(range_timer::begin("before"), -1) << "nothing is timed before the window";
  range_timer::set_recording(true);
  EXPECT_EQ(range_timer::begin("outside"), -1) << "nor outside an open window";
  range_timer::set_window(true);
  range_timer::set_recording(true);
  for (int step = 0; step < 2; ++step) {
    NvtxRange outer("train_step");
    for (int l = 1; l <= 3; ++l) {
      NvtxRange layer("layer %d forward", l);
      busy(2);
    }
  }
  const int open = range_timer::begin("outlives the window");
  range_timer::set_recording(false);
  EXPECT_FALSE(range_timer::pending()) << "the window is still open";
  range_timer::set_window(false);
  EXPECT_FALSE(range_timer::pending()) << "a range is still open";
  range_timer::end(open);
  ASSERT_TRUE(range_timer::pending());
  const std::vector<range_timer::Row> rows = range_timer::take();
  EXPECT_FALSE(range_timer::pending());
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].name, "train_step");
  EXPECT_EQ(rows[1].name, "layer 1 forward");
  EXPECT_EQ(rows[3].name, "layer 3 forward");
  EXPECT_EQ(rows[4].name, "outlives the window");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_EQ(rows[2].calls, 2);
  double layers = 0;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_GE(rows[size_t(i)].total_ms, 2 * 2.0 * 0.9) << rows[size_t(i)].name;
    layers += rows[size_t(i)].total_ms;
  }
  EXPECT_GE(rows[0].total_ms, layers) << "the enclosing range holds its layers";
  // Folded: one "layer * forward" row, 3 calls per step over 2 steps, its least and most named.
  const std::string table = range_timer::format_table(rows, 2, "title");
  EXPECT_NE(table.find("layer * forward"), std::string::npos) << table;
  EXPECT_NE(table.find("3 names"), std::string::npos) << table;
  EXPECT_EQ(table.find("layer 2 forward  "), std::string::npos) << table;
  const nlohmann::json j = nlohmann::json::parse(range_timer::to_json(rows, 3, 4, 1, false));
  EXPECT_EQ(j["first_step"], 3);
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["ranges"].size(), 5u);
  EXPECT_EQ(j["ranges"][1]["name"], "layer 1 forward");
  range_timer::set_enabled(false, false);
}

TEST(RangeTimer, TheProfilerWindowStartsAndStopsTheRecording) {
  range_timer::set_enabled(true, false);
  ProfilerWindow::configure(2, 3, 0);
  for (int step = 1; step <= 4; ++step) {
    ProfilerWindow::step_begin();
    { NvtxRange r("step body"); }
    ProfilerWindow::step_end();
    EXPECT_FALSE(range_timer::pending() && step < 3) << "taken only once the window has closed";
    { NvtxRange r("validation between steps"); }
  }
  ASSERT_TRUE(range_timer::pending());
  const std::optional<ProfilerWindow::Timed> timed = ProfilerWindow::take_timed();
  ASSERT_TRUE(timed.has_value());
  EXPECT_EQ(timed->first, 2);
  EXPECT_EQ(timed->last, 3);
  EXPECT_FALSE(ProfilerWindow::take_timed().has_value()) << "taken once";
  const auto& rows = timed->rows;
  ASSERT_EQ(rows.size(), 1u) << "what runs between the steps is not timed";
  EXPECT_EQ(rows[0].calls, 2) << "steps 2 and 3 only";
  // Disabled: the window captures (for nsys) but nothing is timed.
  range_timer::set_enabled(false, false);
  ProfilerWindow::configure(1, 1, 0);
  ProfilerWindow::step_begin();
  { NvtxRange r("untimed"); }
  ProfilerWindow::step_end();
  EXPECT_FALSE(range_timer::pending());
}
