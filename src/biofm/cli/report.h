// biofm report: one self-contained HTML page (inline SVG, no scripts, no network) with a run's
// curves — loss and validation loss vs steps and vs tokens, learning rate, grad norm,
// throughput, MFU, memory — its config (for several runs, the config keys that differ) and, when the run timed its ranges (profiler.range_times),
// where a step's time went. Several runs overlay their curves.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace biofm {

struct ReportRun {
  std::string name;         // legend label
  std::string source;       // the metrics file read
  std::string config_yaml;  // config.yaml beside it ("" when absent)
  std::vector<nlohmann::json> records;
  // range_times_rank0.json beside it (profiler.range_times), null when absent.
  nlohmann::json range_times;
  // The number of a last line that was cut short by a kill and skipped; 0 when none was.
  int64_t cut_line = 0;
  std::string dir;  // the run directory (given, or the metrics file's directory)
};

// A run directory (metrics.jsonl and config.yaml in it) or any JSONL metrics file (ours, or
// e.g. a Hugging Face Trainer log with `step` and `loss`). Bad lines fail naming the line, except
// a last line cut short by a kill (no newline, not JSON), which is skipped (cut_line).
ReportRun load_report_run(const std::string& path);
// Legend labels told apart: runs of one name (two `val` directories) are labelled with their
// parent directory too ("a/val", "b/val"), then numbered if that is not enough.
void label_runs_apart(std::vector<ReportRun>& runs);

// One plotted curve: (x, y) points of one run.
struct Curve {
  std::vector<double> x, y;
};

// The points of metric `ys` (first key present wins, per record) against `x_axis`: "step"
// (step, global_step, else the record's position) or "tokens" (cumulative unpadded tokens).
Curve extract_curve(const ReportRun& run, const std::vector<std::string>& ys, const std::string& x_axis);

// Whether the run has anything to plot as a loss: a record with a finite training or validation
// loss (loss, train/loss, val_loss, val/loss, eval_loss, eval/loss).
bool has_loss_records(const ReportRun& run);

std::string render_report(const std::vector<ReportRun>& runs);

}  // namespace biofm
