#include "biofm/cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "biofm/core/error.h"
#include "biofm/core/range_timer.h"
#include "biofm/train/metrics.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace biofm {

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("cannot read '", p.string(), "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, int precision = 4) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

const json* first_number(const json& r, const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    auto it = r.find(k);
    if (it != r.end() && it->is_number()) return &*it;
  }
  return nullptr;
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct Chart {
  std::string title, y_label;
  std::vector<std::string> keys;
  std::string x_axis;  // step | tokens
  double y_scale = 1;  // e.g. 100 for percentages
};

// Round tick positions covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  const double span = hi - lo;
  const double raw = span / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string svg_chart(const Chart& c, const std::vector<ReportRun>& runs, int chart_index) {
  std::vector<Curve> curves;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& r : runs) {
    Curve cv = extract_curve(r, c.keys, c.x_axis);
    for (auto& y : cv.y) y *= c.y_scale;
    for (size_t i = 0; i < cv.x.size(); ++i) {
      x0 = std::min(x0, cv.x[i]), x1 = std::max(x1, cv.x[i]);
      y0 = std::min(y0, cv.y[i]), y1 = std::max(y1, cv.y[i]);
    }
    curves.push_back(std::move(cv));
  }
  std::ostringstream o;
  o << "<section class=\"chart\" id=\"chart-" << chart_index << "\"><h2>" << escape(c.title) << "</h2>\n";
  if (!(x0 <= x1)) {
    o << "<p class=\"empty\">no data (keys: ";
    for (size_t i = 0; i < c.keys.size(); ++i) o << (i ? ", " : "") << escape(c.keys[i]);
    o << ")</p></section>\n";
    return o.str();
  }
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  if (y1 == y0) {
    const double pad = y0 == 0 ? 1 : std::abs(y0) * 0.05;
    y0 -= pad, y1 += pad;
  } else {
    const double pad = (y1 - y0) * 0.05;
    y0 -= pad, y1 += pad;
  }
  const double W = 640, H = 320, L = 70, R = 20, T = 16, B = 44;
  auto sx = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto sy = [&](double y) { return T + (y1 - y) / (y1 - y0) * (H - T - B); };
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" role=\"img\" aria-label=\"" << escape(c.title) << "\">\n";
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"#fff\" stroke=\"#999\"/>\n";
  for (double t : ticks(y0, y1))
    o << "<line class=\"grid\" x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << num(sy(t), 6) << "\" y2=\""
      << num(sy(t), 6) << "\"/><text x=\"" << L - 6 << "\" y=\"" << num(sy(t) + 4, 6)
      << "\" text-anchor=\"end\">" << num(t) << "</text>\n";
  for (double t : ticks(x0, x1))
    o << "<line class=\"grid\" y1=\"" << T << "\" y2=\"" << H - B << "\" x1=\"" << num(sx(t), 6) << "\" x2=\""
      << num(sx(t), 6) << "\"/><text x=\"" << num(sx(t), 6) << "\" y=\"" << H - B + 16
      << "\" text-anchor=\"middle\">" << num(t) << "</text>\n";
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 6 << "\" text-anchor=\"middle\">"
    << (c.x_axis == "tokens" ? "tokens" : "step") << "</text>\n";
  o << "<text transform=\"translate(14," << (T + H - B) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << escape(c.y_label) << "</text>\n";
  for (size_t r = 0; r < curves.size(); ++r) {
    const Curve& cv = curves[r];
    if (cv.x.empty()) continue;
    const char* color = kColors[r % std::size(kColors)];
    o << "<path class=\"series\" data-run=\"" << escape(runs[r].name) << "\" fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"1.6\" d=\"";
    for (size_t i = 0; i < cv.x.size(); ++i) o << (i ? " L" : "M") << num(sx(cv.x[i]), 6) << " " << num(sy(cv.y[i]), 6);
    o << "\"/>\n";
    if (cv.x.size() == 1)
      o << "<circle cx=\"" << num(sx(cv.x[0]), 6) << "\" cy=\"" << num(sy(cv.y[0]), 6) << "\" r=\"3\" fill=\"" << color << "\"/>\n";
  }
  if (runs.size() > 1) {
    for (size_t r = 0; r < runs.size(); ++r) {
      const double y = T + 14 + 16 * double(r);
      o << "<rect x=\"" << W - R - 150 << "\" y=\"" << y - 9 << "\" width=\"12\" height=\"3\" fill=\""
        << kColors[r % std::size(kColors)] << "\"/><text class=\"legend\" x=\"" << W - R - 134 << "\" y=\"" << y
        << "\">" << escape(runs[r].name) << "</text>\n";
    }
  }
  o << "</svg></section>\n";
  return o.str();
}

// A run's metrics file, from its config.yaml's text: logger.metrics_file (relative to the run
// directory, or absolute), else metrics.jsonl.
std::string run_metrics_file(const std::string& config_yaml) {
  try {
    const YAML::Node f = YAML::Load(config_yaml)["logger"]["metrics_file"];
    if (f && f.IsScalar() && !f.as<std::string>().empty()) return f.as<std::string>();
  } catch (const std::exception&) {  // (not one of ours: the default name)
  }
  return "metrics.jsonl";
}

}  // namespace

ReportRun load_report_run(const std::string& path) {
  ReportRun run;
  const bool run_dir = fs::is_directory(path);
  const fs::path given = path;
  const fs::path dir = run_dir ? given : given.parent_path().empty() ? fs::path(".") : given.parent_path();
  run.dir = dir.string();
  if (fs::is_regular_file(dir / "config.yaml")) run.config_yaml = read_text(dir / "config.yaml");
  const fs::path metrics = run_dir ? dir / run_metrics_file(run.config_yaml) : given;
  if (!fs::is_regular_file(metrics)) fail("no metrics file at '", metrics.string(), "'");
  run.source = metrics.string();
  // A run directory, or the metrics file that directory would be read from, is named after the
  // directory ("a" for runs/a/metrics.jsonl); any other JSONL file after its stem.
  const fs::path own = dir / run_metrics_file(run.config_yaml);
  const bool whole_run = run_dir || (fs::is_regular_file(own) && fs::equivalent(own, metrics));
  run.name = whole_run ? fs::weakly_canonical(dir).filename().string() : metrics.stem().string();
  if (run.name.empty()) run.name = path;
  if (fs::is_regular_file(dir / "range_times_rank0.json")) {
    try {
      run.range_times = json::parse(read_text(dir / "range_times_rank0.json"));
    } catch (const json::exception& e) {
      fail((dir / "range_times_rank0.json").string(), ": not JSON: ", e.what());
    }
  }
  // (a last line cut short by a kill is skipped, as train skips it on resume: split_jsonl)
  const JsonlText text = split_jsonl(read_text(metrics));
  if (text.cut_tail) run.cut_line = int64_t(text.lines.size()) + 1;
  for (size_t i = 0; i < text.lines.size(); ++i) {
    const std::string& line = text.lines[i];
    const size_t n = i + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      json r = json::parse(line);
      if (r.is_object()) run.records.push_back(std::move(r));
    } catch (const json::exception& e) {
      fail(metrics.string(), ":", n, ": not a JSON object: ", e.what());
    }
  }
  return run;
}

void label_runs_apart(std::vector<ReportRun>& runs) {
  auto count = [&](const std::string& name) {
    return std::count_if(runs.begin(), runs.end(), [&](const ReportRun& r) { return r.name == name; });
  };
  std::vector<bool> shared(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) shared[i] = count(runs[i].name) > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!shared[i]) continue;
    const fs::path dir = fs::weakly_canonical(fs::path(runs[i].dir.empty() ? "." : runs[i].dir));
    const std::string parent = dir.parent_path().filename().string();
    if (!parent.empty()) runs[i].name = parent + "/" + runs[i].name;
  }
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = i + 1, k = 2; j < runs.size(); ++j)
      if (runs[j].name == runs[i].name) runs[j].name += " (" + std::to_string(k++) + ")";
}

namespace {

double step_of(const json& r, size_t index) {
  const json* s = first_number(r, {"step", "global_step", "trainer/global_step"});
  return s ? s->get<double>() : double(index + 1);
}

// The records a run's curves are drawn from: when the step goes back (a resumed run appends
// to the same file), the records from that step on are superseded by the new ones.
std::vector<const json*> effective_records(const ReportRun& run) {
  std::vector<const json*> out;
  std::vector<double> steps;
  for (size_t i = 0; i < run.records.size(); ++i) {
    const double step = step_of(run.records[i], i);
    if (!steps.empty() && step < steps.back())
      while (!steps.empty() && steps.back() >= step) {
        steps.pop_back();
        out.pop_back();
      }
    steps.push_back(step);
    out.push_back(&run.records[i]);
  }
  return out;
}

}  // namespace

Curve extract_curve(const ReportRun& run, const std::vector<std::string>& ys, const std::string& x_axis) {
  Curve c;
  double tokens = 0, prev_step = 0;
  const std::vector<const json*> records = effective_records(run);
  for (size_t i = 0; i < records.size(); ++i) {
    const json& r = *records[i];
    const double step = step_of(r, i);
    // Our records carry the window's throughput: real tokens = tokens/s · s/step · steps.
    if (const json* seen = first_number(r, {"num_input_tokens_seen", "tokens_seen", "consumed_tokens"})) {
      tokens = seen->get<double>();
      prev_step = step;
    } else if (const json* tps = first_number(r, {"unpadded_tokens_per_sec", "train/unpadded_tokens_per_second_per_gpu"})) {
      if (const json* st = first_number(r, {"step_time"})) tokens += tps->get<double>() * st->get<double>() * (step - prev_step);
      prev_step = step;
    }
    const json* y = first_number(r, ys);
    if (!y || !std::isfinite(y->get<double>())) continue;
    if (x_axis == "tokens") {
      if (tokens <= 0) continue;
      c.x.push_back(tokens);
    } else {
      c.x.push_back(step);
    }
    c.y.push_back(y->get<double>());
  }
  return c;
}

namespace {

// "Where a step goes" (profiler.range_times, rank 0): the folded ranges per optimizer step.
std::string range_times_table(const ReportRun& r) {
  if (!r.range_times.is_object() || !r.range_times.contains("ranges")) return "";
  std::vector<range_timer::Row> rows;
  try {
    for (const json& x : r.range_times.at("ranges"))
      rows.push_back({x.at("name").get<std::string>(), x.at("calls").get<int64_t>(), x.at("total_ms").get<double>()});
  } catch (const json::exception& e) {
    fail(r.name, ": range_times_rank0.json: ", e.what());
  }
  const int64_t first = r.range_times.value("first_step", int64_t(0)), last = r.range_times.value("last_step", first);
  const double steps = double(std::max<int64_t>(last - first + 1, 1));
  double step_ms = 0;
  for (const range_timer::Row& row : rows)
    if (row.name == "train_step") step_ms = row.total_ms / steps;
  std::ostringstream o;
  o << "<h2>Where a step goes: " << escape(r.name) << " (steps " << first << "-" << last << ", rank 0, "
    << escape(r.range_times.value("clock", std::string("?"))) << ")</h2>\n<table class=\"ranges\"><tr><th>range</th>"
       "<th>calls per step</th><th>ms per step</th><th>% of the step</th><th>least / most</th></tr>\n";
  for (const range_timer::Group& g : range_timer::fold(rows)) {
    const double ms = g.total_ms / steps;
    o << "<tr><td>" << escape(g.name) << "</td><td>" << num(double(g.calls) / steps) << "</td><td>" << num(ms)
      << "</td><td>" << (step_ms > 0 ? num(100.0 * ms / step_ms) : std::string()) << "</td><td>"
      << (g.members > 1 ? escape(g.least) + " " + num(g.least_ms / steps) + " / " + escape(g.most) + " " +
                              num(g.most_ms / steps)
                        : std::string())
      << "</td></tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

// A config's leaves as dotted keys ("adamw_kwargs.lr") with their values as YAML text (a list
// in flow style).
void flatten(const YAML::Node& n, const std::string& key, std::map<std::string, std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) flatten(kv.second, (key.empty() ? "" : key + ".") + kv.first.as<std::string>(), out);
    return;
  }
  YAML::Emitter e;
  e << YAML::Flow << n;
  out[key] = e.c_str();
}

// "Config differences": the keys whose values differ between the runs' config.yaml (runs without
// one, or whose config is not a YAML map, are left out; nothing when fewer than two remain).
std::string config_diff_table(const std::vector<ReportRun>& runs) {
  std::vector<const ReportRun*> with;
  std::vector<std::map<std::string, std::string>> flat;
  for (const ReportRun& r : runs) {
    try {
      const YAML::Node root = YAML::Load(r.config_yaml);
      if (!root.IsMap()) continue;
      std::map<std::string, std::string> f;
      flatten(root, "", f);
      flat.push_back(std::move(f));
      with.push_back(&r);
    } catch (const YAML::Exception&) {  // (shown as it is under Configs)
    }
  }
  if (with.size() < 2) return "";
  std::set<std::string> keys;
  for (const auto& f : flat)
    for (const auto& [k, v] : f) keys.insert(k);
  std::ostringstream rows;
  for (const std::string& k : keys) {
    std::vector<std::string> values;
    for (const auto& f : flat) values.push_back(f.count(k) ? f.at(k) : "(absent)");
    if (std::all_of(values.begin(), values.end(), [&](const std::string& v) { return v == values[0]; })) continue;
    rows << "<tr><td>" << escape(k) << "</td>";
    for (const std::string& v : values) rows << "<td>" << escape(v) << "</td>";
    rows << "</tr>\n";
  }
  std::ostringstream o;
  o << "<h2>Config differences</h2>\n";
  if (rows.str().empty()) return o.str() + "<p>the configs are the same</p>\n";
  o << "<table id=\"config-diff\"><tr><th>key</th>";
  for (const ReportRun* r : with) o << "<th>" << escape(r->name) << "</th>";
  o << "</tr>\n" << rows.str() << "</table>\n";
  return o.str();
}

}  // namespace

bool has_loss_records(const ReportRun& run) {
  return !extract_curve(run, {"train/loss", "loss"}, "step").y.empty() ||
         !extract_curve(run, {"val/loss", "val_loss", "eval_loss", "eval/loss"}, "step").y.empty();
}

std::string render_report(const std::vector<ReportRun>& runs) {
  const std::vector<Chart> charts = {
      {"Training loss", "loss", {"train/loss", "loss"}, "step"},
      {"Validation loss", "loss", {"val/loss", "val_loss", "eval_loss", "eval/loss"}, "step"},
      {"Training loss vs tokens", "loss", {"train/loss", "loss"}, "tokens"},
      {"Validation loss vs tokens", "loss", {"val/loss", "val_loss", "eval_loss", "eval/loss"}, "tokens"},
      {"Learning rate", "learning rate", {"train/learning_rate", "lr", "learning_rate"}, "step"},
      {"Gradient norm", "grad norm", {"train/grad_norm", "grad_norm"}, "step"},
      {"Throughput (unpadded tokens/s per GPU)", "tokens/s",
       {"train/unpadded_tokens_per_second_per_gpu", "unpadded_tokens_per_sec"}, "step"},
      {"MFU (%)", "MFU %", {"train/mfu", "mfu_seed", "mfu"}, "step", 100},
      {"Peak GPU memory (GiB)", "GiB", {"train/gpu_memory_peak_gib", "gpu_mem_peak_gib"}, "step"},
      // The recipes' key (also biofm's): each logging window's peak allocation, GiB despite "_gb".
      {"GPU memory allocated, window peak (GiB)", "GiB",
       {"train/gpu_memory_allocated_max_gb", "gpu_mem_allocated_max_gib"}, "step"},
      // The window's median SM clock and power (core/gpu_monitor.h): at the power limit the clock
      // drops, and throughput with it.
      {"GPU SM clock (MHz, median of the window)", "MHz", {"gpu/sm_clock_mhz", "gpu_sm_clock_mhz"}, "step"},
      {"GPU power (W, median of the window)", "W", {"gpu/power_w", "gpu_power_w"}, "step"},
  };
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>biofm report</title>\n"
       "<style>body{font-family:sans-serif;margin:24px;color:#222}"
       ".charts{display:flex;flex-wrap:wrap;gap:12px}.chart h2{font-size:15px;margin:4px 0}"
       "svg text{font-size:11px;fill:#333}svg line.grid{stroke:#e6e6e6}"
       "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
       "pre{background:#f6f6f6;padding:8px;font-size:12px;max-height:480px;overflow:auto}"
       ".swatch{display:inline-block;width:12px;height:12px;margin-right:4px}.empty{color:#888}</style>\n"
       "</head><body>\n<h1>biofm report</h1>\n";
  o << "<table id=\"runs\"><tr><th>run</th><th>metrics</th><th>records</th><th>last step</th><th>last loss</th>"
       "<th>last validation loss</th><th>first record</th><th>last record</th></tr>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const ReportRun& r = runs[i];
    const Curve loss = extract_curve(r, {"train/loss", "loss"}, "step");
    const Curve val = extract_curve(r, {"val/loss", "val_loss", "eval_loss", "eval/loss"}, "step");
    auto stamp = [&](bool last) -> std::string {
      for (size_t k = 0; k < r.records.size(); ++k) {
        const json& rec = r.records[last ? r.records.size() - 1 - k : k];
        if (rec.contains("timestamp") && rec["timestamp"].is_string()) return rec["timestamp"].get<std::string>();
      }
      return "";
    };
    o << "<tr><td><span class=\"swatch\" style=\"background:" << kColors[i % std::size(kColors)] << "\"></span>"
      << escape(r.name) << "</td><td>" << escape(r.source) << "</td><td>" << r.records.size() << "</td><td>"
      << (loss.x.empty() ? "" : num(loss.x.back(), 10)) << "</td><td>" << (loss.y.empty() ? "" : num(loss.y.back()))
      << "</td><td>" << (val.y.empty() ? "" : num(val.y.back())) << "</td><td>" << escape(stamp(false))
      << "</td><td>" << escape(stamp(true)) << "</td></tr>\n";
  }
  o << "</table>\n<div class=\"charts\">\n";
  for (size_t i = 0; i < charts.size(); ++i) o << svg_chart(charts[i], runs, int(i));
  o << "</div>\n";
  for (const ReportRun& r : runs) o << range_times_table(r);
  o << config_diff_table(runs);
  o << "<h2>Configs</h2>\n";
  for (const ReportRun& r : runs)
    o << "<details class=\"config\"><summary>" << escape(r.name) << "</summary><pre>"
      << (r.config_yaml.empty() ? "(no config.yaml beside the metrics file)" : escape(r.config_yaml))
      << "</pre></details>\n";
  o << "</body></html>\n";
  return o.str();
}

}  // namespace biofm
