#include <cstdio>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/report.h"
#include "biofm/core/error.h"
#include "biofm/io/atomic_file.h"

namespace biofm {

const CommandSpec kReportSpec{
    .name = "report",
    .synopsis = "RUN_DIR [RUN_DIR ...] [--output report.html]",
    .summary = "one self-contained HTML page of runs' curves and configs",
    .flags = {{"--output", "FILE", "where to write the page (default: report.html)"}},
    .details =
        "One self-contained HTML page (inline SVG; no scripts, no network) with loss and validation\n"
        "loss vs steps and tokens, learning rate, grad norm, throughput, MFU, memory and each run's\n"
        "config.yaml. Several runs overlay their curves, and a table shows their config keys that differ. A RUN_DIR may also be a JSONL metrics file\n"
        "(e.g. a Hugging Face Trainer log with `step` and `loss`). An input without a loss record is\n"
        "warned about; when none has one, nothing is written (exit 1).",
};

int cmd_report(int argc, char** argv) {
  const Flags f = parse_flags(kReportSpec, argc, argv);
  if (f.help()) {
    print_help(kReportSpec);
    return 0;
  }
  if (f.positional().empty()) usage_fail("biofm report: give at least one run directory or metrics file");
  std::vector<ReportRun> runs;
  size_t with_loss = 0;
  for (const auto& p : f.positional()) {
    runs.push_back(load_report_run(p));
    if (runs.back().cut_line > 0)
      std::fprintf(stderr, "note: %s:%lld: skipped the last line, cut short (no newline, not JSON: a killed run's)\n",
                   runs.back().source.c_str(), (long long)runs.back().cut_line);
    if (has_loss_records(runs.back()))
      ++with_loss;
    else
      std::fprintf(stderr, "warning: %s: no step/loss records (%zu record(s), none with a loss: loss, train/loss, "
                   "val_loss, eval_loss): nothing of it to plot\n", runs.back().source.c_str(), runs.back().records.size());
  }
  if (with_loss == 0)
    fail("no step/loss records in ", runs.size() == 1 ? "the input" : "any input", " (warnings above): no report written");
  label_runs_apart(runs);
  const std::string out = f.get("--output", "report.html");
  write_file_atomic(out, render_report(runs));
  std::printf("report: %s (%zu run%s)\n", out.c_str(), runs.size(), runs.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace biofm
