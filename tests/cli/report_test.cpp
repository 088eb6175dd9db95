#include "biofm/cli/report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "biofm/core/error.h"
#include "biofm/core/range_timer.h"
#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm;
using nlohmann::json;

namespace {

ReportRun ours(const std::string& name, double loss0) {
  ReportRun r{name, name + "/metrics.jsonl", "seed: 42\n", {}};
  for (int s = 10; s <= 40; s += 10) {
    json rec = {{"step", s}, {"loss", loss0 - 0.01 * s}, {"lr", 1e-3}, {"grad_norm", 1.0},
                {"unpadded_tokens_per_sec", 1000.0}, {"step_time", 0.5}, {"mfu_seed", 0.25},
                {"timestamp", "2026-01-01T00:00:0" + std::to_string(s / 10) + ".000Z"}};
    if (s % 20 == 0) rec["val_loss"] = loss0 - 0.005 * s;
    r.records.push_back(rec);
  }
  return r;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(Report, CurvesAgainstStepsAndTokens) {
  const ReportRun r = ours("a", 3.0);
  const Curve loss = extract_curve(r, {"train/loss", "loss"}, "step");
  EXPECT_EQ(loss.x, (std::vector<double>{10, 20, 30, 40}));
  EXPECT_DOUBLE_EQ(loss.y[3], 2.6);
  const Curve val = extract_curve(r, {"val/loss", "val_loss"}, "step");
  EXPECT_EQ(val.x, (std::vector<double>{20, 40}));
  // 1000 tokens/s at 0.5 s/step: 500 tokens per step, 10 steps per record.
  const Curve by_tokens = extract_curve(r, {"loss"}, "tokens");
  EXPECT_EQ(by_tokens.x, (std::vector<double>{5000, 10000, 15000, 20000}));
}

TEST(Report, AResumedRunSupersedesItsRepeatedSteps) {
  ReportRun r = ours("resumed", 3.0);  // steps 10..40, then a resume from step 20 redoes 30, 40
  for (int s = 30; s <= 40; s += 10)
    r.records.push_back({{"step", s}, {"loss", 1.0}, {"unpadded_tokens_per_sec", 1000.0}, {"step_time", 0.5}});
  const Curve loss = extract_curve(r, {"loss"}, "step");
  EXPECT_EQ(loss.x, (std::vector<double>{10, 20, 30, 40}));
  EXPECT_EQ(loss.y, (std::vector<double>{2.9, 2.8, 1.0, 1.0}));
  EXPECT_EQ(extract_curve(r, {"loss"}, "tokens").x, (std::vector<double>{5000, 10000, 15000, 20000}));
  const Curve val = extract_curve(r, {"val_loss"}, "step");
  EXPECT_EQ(val.x, (std::vector<double>{20}));  // the old step-40 validation was superseded
}

TEST(Report, OverlaysRunsInOneSelfContainedPage) {
  const std::string html = render_report({ours("run-a", 3.0), ours("run<b>", 3.5)});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  // Charts with data: train loss, val loss, both vs tokens, lr, grad norm, throughput, MFU:
  // 8 charts x 2 runs. The two memory charts, GPU clock and GPU power have no data (CPU
  // records): an "empty" note each, no path.
  EXPECT_EQ(count(html, "<path class=\"series\""), 16u);
  EXPECT_EQ(count(html, "<svg"), 8u);
  EXPECT_EQ(count(html, "class=\"empty\""), 4u);
  EXPECT_NE(html.find("GPU SM clock"), std::string::npos);
  EXPECT_NE(html.find("data-run=\"run&lt;b&gt;\""), std::string::npos);  // escaped
  EXPECT_EQ(html.find("run<b>"), std::string::npos);
  EXPECT_NE(html.find("<pre>seed: 42\n</pre>"), std::string::npos);
  // Every path has one point per record, inside the plot area.
  std::regex path_re("<path class=\"series\"[^>]* d=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), path_re); it != std::sregex_iterator(); ++it) {
    const std::string d = (*it)[1];
    EXPECT_EQ(d[0], 'M');
    const size_t points = 1 + count(d, " L");
    EXPECT_TRUE(points == 4 || points == 2) << d;
    std::regex num_re("[-0-9.e]+");
    int i = 0;
    for (auto n = std::sregex_iterator(d.begin(), d.end(), num_re); n != std::sregex_iterator(); ++n, ++i) {
      const double v = std::stod((*n).str());
      if (i % 2 == 0) EXPECT_TRUE(v >= 70 && v <= 620) << d;   // x within the plot
      else EXPECT_TRUE(v >= 16 && v <= 276) << d;              // y within the plot
    }
  }
}

TEST(Report, ReadsAForeignJsonl) {
  const std::string dir = testing::TempDir() + "/biofm_report_hf";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/trainer_log.jsonl") << "{\"step\": 1, \"loss\": 4.0, \"learning_rate\": 0.0001}\n"
                                               "\n"
                                               "{\"step\": 2, \"loss\": 3.0, \"learning_rate\": 0.0002,"
                                               " \"train/gpu_memory_allocated_max_gb\": 21.5}\n"
                                               "{\"step\": 2, \"eval_loss\": 3.1}\n";
  const ReportRun r = load_report_run(dir + "/trainer_log.jsonl");
  EXPECT_EQ(r.name, "trainer_log");
  EXPECT_EQ(r.records.size(), 3u);
  EXPECT_EQ(extract_curve(r, {"loss"}, "step").y, (std::vector<double>{4.0, 3.0}));
  EXPECT_EQ(extract_curve(r, {"eval_loss"}, "step").x, (std::vector<double>{2}));
  const std::string html = render_report({r});
  // loss, validation loss, lr, and the recipes' memory key
  EXPECT_EQ(count(html, "<path class=\"series\""), 4u);
  std::ofstream(dir + "/bad.jsonl") << "{\"step\": 1}\nnot json\n";
  try {
    load_report_run(dir + "/bad.jsonl");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_report_run(dir + "/nothing_here"), std::exception);
}

// A kill can cut the last line of metrics.jsonl short: that line is skipped (and said), as train
// skips it on resume; a bad line anywhere else is still an error.
TEST(Report, SkipsALastLineCutShortByAKill) {
  const std::string dir = testing::TempDir() + "/biofm_report_cut";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string good = "{\"step\": 1, \"loss\": 4.0}\n{\"step\": 2, \"loss\": 3.0}\n";
  std::ofstream(dir + "/metrics.jsonl") << good << "{\"step\": 3, \"lo";
  const ReportRun r = load_report_run(dir);
  EXPECT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.cut_line, 3);
  EXPECT_EQ(count(render_report({r}), "<path class=\"series\""), 1u);
  // A whole last line without its newline is a record; a cut line followed by others is an error.
  std::ofstream(dir + "/metrics.jsonl", std::ios::trunc) << good << "{\"step\": 3, \"loss\": 2.0}";
  EXPECT_EQ(load_report_run(dir).records.size(), 3u);
  EXPECT_EQ(load_report_run(dir).cut_line, 0);
  std::ofstream(dir + "/metrics.jsonl", std::ios::trunc) << "{\"step\": 1, \"lo\n" << good;
  try {
    load_report_run(dir);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:1: not a JSON object"), std::string::npos) << e.what();
  }
  // A cut line with its newline (not what a kill leaves) is an error too.
  std::ofstream(dir + "/metrics.jsonl", std::ios::trunc) << good << "{\"step\": 3, \"lo\n";
  EXPECT_THROW(load_report_run(dir), std::exception);
}

// A run trained with logger.metrics_file=NAME (its config.yaml says so) is read from that file;
// two runs of one directory name get their parent directory in the legend.
TEST(Report, FollowsTheRunsMetricsFileAndTellsSameNamedRunsApart) {
  const std::string root = testing::TempDir() + "/biofm_report_names";
  fs::remove_all(root);
  for (const char* parent : {"a", "b"}) {
    const std::string dir = root + "/" + parent + "/val";
    fs::create_directories(dir + "/logs");
    std::ofstream(dir + "/config.yaml") << "seed: 1\nlogger:\n  metrics_file: logs/m.jsonl\n";
    std::ofstream(dir + "/logs/m.jsonl") << "{\"step\": 1, \"loss\": 4.0}\n";
  }
  std::vector<ReportRun> runs = {load_report_run(root + "/a/val"), load_report_run(root + "/b/val")};
  EXPECT_EQ(runs[0].records.size(), 1u);
  EXPECT_NE(runs[0].source.find("logs/m.jsonl"), std::string::npos) << runs[0].source;
  label_runs_apart(runs);
  EXPECT_EQ(runs[0].name, "a/val");
  EXPECT_EQ(runs[1].name, "b/val");
  std::vector<ReportRun> twice = {load_report_run(root + "/a/val"), load_report_run(root + "/a/val")};
  label_runs_apart(twice);
  EXPECT_EQ(twice[0].name, "a/val");
  EXPECT_EQ(twice[1].name, "a/val (2)");
}

// A run's metrics file given as the input is named after its run directory, as the directory
// is (it used to be "runs/metrics" and "runs/metrics (2)"); another JSONL file beside it keeps
// its own name.
TEST(Report, NamesARunsMetricsFileAfterItsDirectory) {
  const std::string root = testkit::fresh_dir("report_file_names");
  for (const char* run : {"a", "b"}) {
    fs::create_directories(root + "/runs/" + run);
    std::ofstream(root + "/runs/" + run + "/metrics.jsonl") << "{\"step\": 1, \"loss\": 4.0}\n";
  }
  std::ofstream(root + "/runs/b/trainer_log.jsonl") << "{\"step\": 1, \"loss\": 4.0}\n";
  std::vector<ReportRun> runs = {load_report_run(root + "/runs/a/metrics.jsonl"),
                                 load_report_run(root + "/runs/b/metrics.jsonl"),
                                 load_report_run(root + "/runs/b/trainer_log.jsonl")};
  label_runs_apart(runs);
  EXPECT_EQ(runs[0].name, "a");
  EXPECT_EQ(runs[1].name, "b");
  EXPECT_EQ(runs[2].name, "trainer_log");
  const testkit::RunResult cli = testkit::run_biofm("report " + root + "/runs/a/metrics.jsonl " + root +
                                                    "/runs/b/metrics.jsonl --output " + root + "/m.html");
  ASSERT_EQ(cli.code, 0) << cli.output;
  std::ifstream in(root + "/m.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("data-run=\"a\""), std::string::npos);
  EXPECT_NE(html.find("data-run=\"b\""), std::string::npos);
  EXPECT_EQ(html.find("metrics (2)"), std::string::npos);
}

// Two runs' configs: a table of the keys whose values differ (nested keys dotted, a key one run
// lacks as "(absent)"), none of the keys they share; runs without a config.yaml are left out.
TEST(Report, TablesTheConfigDifferences) {
  ReportRun a = ours("a", 3.0), b = ours("b<2>", 3.5), bare = ours("bare", 3.2);
  a.config_yaml = "seed: 1\nadamw_kwargs:\n  lr: 0.001\n  betas: [0.9, 0.98]\nlogger:\n  frequency: 10\n";
  b.config_yaml = "seed: 2\nadamw_kwargs:\n  lr: 0.001\n  betas: [0.9, 0.95]\nlogger:\n  frequency: 10\nfp8: true\n";
  bare.config_yaml = "";
  const std::string html = render_report({a, b, bare});
  const size_t at = html.find("<table id=\"config-diff\">");
  ASSERT_NE(at, std::string::npos) << html;
  const std::string table = html.substr(at, html.find("</table>", at) - at);
  EXPECT_NE(table.find("<tr><th>key</th><th>a</th><th>b&lt;2&gt;</th></tr>"), std::string::npos) << table;
  EXPECT_NE(table.find("<tr><td>adamw_kwargs.betas</td><td>[0.9, 0.98]</td><td>[0.9, 0.95]</td></tr>"),
            std::string::npos) << table;
  EXPECT_NE(table.find("<tr><td>fp8</td><td>(absent)</td><td>true</td></tr>"), std::string::npos) << table;
  EXPECT_NE(table.find("<tr><td>seed</td><td>1</td><td>2</td></tr>"), std::string::npos) << table;
  EXPECT_EQ(count(table, "<tr>"), 4u) << table;  // the header and the three keys that differ
  // Same configs: said; one run: no section.
  EXPECT_NE(render_report({ours("x", 3.0), ours("y", 3.0)}).find("<p>the configs are the same</p>"), std::string::npos);
  EXPECT_EQ(render_report({a}).find("Config differences"), std::string::npos);
}

// A run that timed its ranges (profiler.range_times) gets a "where a step goes" table from the
// range_times_rank0.json beside its metrics: folded rows, per step, as a share of train_step.
TEST(Report, ShowsWhereAStepGoesWhenTheRunTimedItsRanges) {
  const fs::path dir = fs::path(testing::TempDir()) / "biofm_report_ranges";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.jsonl") << json{{"step", 1}, {"loss", 3.0}}.dump() << "\n";
  std::ofstream(dir / "range_times_rank0.json")
      << range_timer::to_json({{"train_step", 2, 200.0}, {"layer 1 forward", 2, 40.0}, {"layer 2 forward", 2, 60.0}},
                              3, 4, 0, true);
  const ReportRun timed = load_report_run(dir.string());
  ASSERT_TRUE(timed.range_times.is_object());
  const std::string html = render_report({timed, ours("plain", 3.5)});
  EXPECT_EQ(count(html, "<table class=\"ranges\">"), 1u) << "only the run that timed its ranges";
  EXPECT_NE(html.find("(steps 3-4, rank 0, cuda events (stream time))"), std::string::npos) << html;
  // 100 ms of layers over 2 steps: 50 ms per step, half of the 100 ms step; its least and most.
  EXPECT_NE(html.find("<tr><td>layer * forward</td><td>2</td><td>50</td><td>50</td>"
                      "<td>layer 1 forward 20 / layer 2 forward 30</td></tr>"),
            std::string::npos)
      << html;
  std::ofstream(dir / "range_times_rank0.json") << "{not json";
  EXPECT_THROW(load_report_run(dir.string()), Error);
}

// An input with no loss record (an empty metrics file, another tool's JSONL) is warned about, and
// a report none of whose inputs has one is an error with no page written (both used to be a
// silent success with an empty page).
TEST(Report, InputsWithoutLossRecordsAreSaid) {
  const std::string dir = testkit::fresh_dir("report_no_loss");
  fs::create_directories(dir + "/emptyrun");
  std::ofstream(dir + "/emptyrun/metrics.jsonl") << "";
  std::ofstream(dir + "/nostep.jsonl") << "{\"a\": 1}\n";
  std::ofstream(dir + "/good.jsonl") << "{\"step\": 1, \"loss\": 4.0}\n{\"step\": 2, \"loss\": 3.5}\n";
  EXPECT_TRUE(has_loss_records(load_report_run(dir + "/good.jsonl")));
  EXPECT_FALSE(has_loss_records(load_report_run(dir + "/nostep.jsonl")));

  testkit::RunResult none = testkit::run_biofm("report " + dir + "/emptyrun " + dir + "/nostep.jsonl --output " + dir + "/none.html");
  EXPECT_EQ(none.code, 1) << none.output;
  EXPECT_NE(none.output.find("warning: " + dir + "/emptyrun/metrics.jsonl: no step/loss records (0 record(s)"),
            std::string::npos) << none.output;
  EXPECT_NE(none.output.find("warning: " + dir + "/nostep.jsonl: no step/loss records (1 record(s)"), std::string::npos)
      << none.output;
  EXPECT_NE(none.output.find("biofm report: error: no step/loss records in any input"), std::string::npos) << none.output;
  EXPECT_FALSE(fs::exists(dir + "/none.html"));

  testkit::RunResult some = testkit::run_biofm("report " + dir + "/good.jsonl " + dir + "/nostep.jsonl --output " + dir + "/some.html");
  EXPECT_EQ(some.code, 0) << some.output;
  EXPECT_NE(some.output.find("warning: " + dir + "/nostep.jsonl: no step/loss records"), std::string::npos) << some.output;
  EXPECT_EQ(some.output.find("good.jsonl: no step"), std::string::npos) << some.output;
  EXPECT_TRUE(fs::exists(dir + "/some.html"));
}
