#include "biofm/train/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "biofm/core/device_memory_stats.h"
#include "biofm/core/error.h"

namespace biofm {

double seed_formula_flops(const ModelDims& d, const Batch& b) {
  const double H = double(d.hidden), L = double(d.layers), V = double(d.vocab);
  const double rows = double(b.num_rows());
  double sum_s2 = 0;
  const int64_t n = b.num_sequences();
  const int32_t* cu = b.cu_seqlens.i32();
  const int32_t* lens = b.seq_lens.i32();
  const bool padded = n > 0 && cu[n] - cu[0] > [&] {
    int64_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += lens[i];
    return s;
  }();
  for (int64_t i = 0; i < n; ++i) {
    const double s = padded ? double(cu[i + 1] - cu[i]) : double(lens[i]);
    // A context-parallel share's queries attend the whole sequence: its rows × the sequence's.
    sum_s2 += b.cp ? double(lens[i]) * double(b.cp->global_seq_lens.i32()[i]) : s * s;
  }
  return (24.0 * rows * H * H + 4.0 * sum_s2 * H) * 3.0 * L + 6.0 * rows * H * V;
}

namespace {
// (logger.metrics_file may name a subdirectory of output_dir)
const std::string& with_parent_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);  // (a failure is reported below)
  return path;
}
}  // namespace

JsonlSink::JsonlSink(const std::string& path, bool append)
    : out_(with_parent_dir(path), append ? std::ios::app : std::ios::trunc), path_(path) {
  if (!out_) fail("cannot write metrics file '", path, "'");
}

void JsonlSink::write(const nlohmann::json& record) {
  out_ << record.dump() << "\n";
  out_.flush();
  if (!out_) fail("writing metrics file '", path_, "' failed");
}

JsonlText split_jsonl(const std::string& text) {
  JsonlText t;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    t.lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  const bool unterminated = !text.empty() && text.back() != '\n';
  if (unterminated && t.lines.back().find_first_not_of(" \t\r") != std::string::npos &&
      !nlohmann::json::accept(t.lines.back())) {
    t.lines.pop_back();
    t.cut_tail = true;
  }
  return t;
}

void ThroughputWindow::add_batch(const Batch& b) {
  rows_ += b.num_rows();
  real_ += b.num_real_tokens;
  flops_seed_ += seed_formula_flops(dims_, b);
}

void ThroughputWindow::reset() {
  if (watch_gpu_) gpu_ = std::make_unique<GpuMonitor>();
  start_ = std::chrono::steady_clock::now();
  steps_ = rows_ = real_ = 0;
  flops_seed_ = 0;
}

namespace {
std::string format_eta(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const int h = int(s / 3600), m = int(std::fmod(s, 3600) / 60), sec = int(std::fmod(s, 60));
  if (h)
    std::snprintf(buf, sizeof buf, "%dh%02dm", h, m);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", m, sec);
  return buf;
}
}  // namespace

double perplexity_of(double loss) { return std::exp(std::min(loss, kMaxLogPerplexity)); }

std::string perplexity_text(double ppl) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::isfinite(ppl) && ppl < 1e6 ? "%.3f" : "%.3g", ppl);
  return buf;
}

nlohmann::json ThroughputWindow::report(int64_t step, int64_t total_steps, double loss, double lr,
                                        double grad_norm, Device device) {
  const double span = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double step_time = steps_ ? span / double(steps_) : 0;
  const double tps = double(rows_) / span, real_tps = double(real_) / span;
  const double mfu_seed = flops_seed_ / span / kPeakBf16Flops;
  const double mfu_6n = 6.0 * double(dims_.parameters) * double(real_) / span / kPeakBf16Flops;
  const double eta = double(total_steps - step) * step_time;
  nlohmann::json rec = {{"step", step},           {"loss", loss},
                        {"perplexity", perplexity_of(loss)}, {"lr", lr},
                        {"grad_norm", grad_norm}, {"tokens_per_sec", tps},
                        {"unpadded_tokens_per_sec", real_tps}, {"step_time", step_time},
                        {"mfu_seed", mfu_seed},   {"mfu_6n", mfu_6n}};
  if (log_mfu_) {  // (the recipes' perf logger under log_mfu)
    rec["train/mfu_pct"] = 100 * mfu_seed;
    rec["train/tflops_per_gpu"] = flops_seed_ / span / 1e12;
  }
  rec["total_steps"] = total_steps;
  rec["eta_s"] = eta;
  rec["unpadded_tokens_per_step"] = steps_ ? double(real_) / double(steps_) : 0.0;
  if (device == Device::CUDA) {
    // GiB (2^30 bytes), as the recipes' torch.cuda.memory_allocated() / 1024**3 under their
    // "_gb" names.
    const DeviceMemoryStats m = device_memory_stats();
    const double gib = double(1ull << 30);
    run_peak_bytes_ = std::max(run_peak_bytes_, m.peak_allocated_bytes);
    rec["gpu_mem_peak_gib"] = double(run_peak_bytes_) / gib;
    rec["gpu_mem_allocated_max_gib"] = double(m.peak_allocated_bytes) / gib;
    rec["gpu_mem_allocated_mean_gib"] = double(m.allocated_bytes) / gib;
    device_memory_reset_peak();  // (the next window's peak is its own; run_peak_bytes_ keeps the run's)
  }
  if (gpu_) {
    const GpuActivity a = gpu_->stop();
    gpu_.reset();
    if (a.available) {
      rec["gpu_sm_clock_mhz"] = a.sm_clock_median_mhz;
      rec["gpu_power_w"] = a.power_median_w;
      rec["gpu_temperature_c"] = a.temperature_max_c;
      rec["gpu_power_capped_fraction"] = a.power_capped_fraction;
    }
  }
  return rec;
}

void ProgressLineSink::write(const nlohmann::json& r) {
  if (r.contains("loss") || r.contains("no_target_tokens")) {
    std::string mem;
    if (r.contains("gpu_mem_peak_gib")) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " | mem %.1f GiB | MFU %.1f%%", r["gpu_mem_peak_gib"].get<double>(),
                    100 * r["mfu_seed"].get<double>());
      mem = buf;
    }
    if (r.contains("gpu_sm_clock_mhz")) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " | %.0f MHz %.0f W", r["gpu_sm_clock_mhz"].get<double>(),
                    r["gpu_power_w"].get<double>());
      mem += buf;
    }
    char loss[64] = "loss - (no target tokens)";  // (a step without labels has no loss)
    if (r.contains("loss"))
      std::snprintf(loss, sizeof loss, "loss %.4f | ppl %7s", r["loss"].get<double>(),
                    perplexity_text(perplexity_of(r["loss"].get<double>())).c_str());
    std::printf("step %6lld/%lld | %s | lr %.3e | grad_norm %.3f | tok/s %.0f | unpadded tok/s %.0f%s | ETA %s\n",
                (long long)r["step"].get<int64_t>(), (long long)r["total_steps"].get<int64_t>(), loss,
                r["lr"].get<double>(), r["grad_norm"].get<double>(), r["tokens_per_sec"].get<double>(),
                r["unpadded_tokens_per_sec"].get<double>(), mem.c_str(), format_eta(r["eta_s"].get<double>()).c_str());
  }
  if (r.contains("val_loss")) {
    std::printf("  validation | loss %.4f | ppl %s | accuracy %.4f\n", r["val_loss"].get<double>(),
                perplexity_text(r["val_perplexity"].get<double>()).c_str(), r["val_accuracy"].get<double>());
  }
  std::fflush(stdout);
}

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = std::time_t(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms % 1000));
  return buf;
}

nlohmann::json with_standard_keys(nlohmann::json r, std::chrono::system_clock::time_point now) {
  // The recipes' names (bionemo-recipes perf_logger.py). Their "_gb" memory figures are
  // torch.cuda.max_memory_allocated() / memory_allocated() divided by 1024**3, i.e. GiB despite
  // the name: ours are GiB too. train/gpu_memory_allocated_max_gb is the window's peak (their
  // max_memory_allocated with the peak reset per window), the largest over ranks;
  // train/gpu_memory_allocated_mean_gb what is allocated at the logging step, the mean over ranks.
  static const std::pair<const char*, const char*> kRecipeNames[] = {
      {"loss", "train/loss"},
      {"perplexity", "train/perplexity"},
      {"lr", "train/learning_rate"},
      {"grad_norm", "train/grad_norm"},
      {"step_time", "train/step_time"},
      {"unpadded_tokens_per_sec", "train/unpadded_tokens_per_second_per_gpu"},
      {"tokens_per_sec", "train/tokens_per_second_per_gpu"},
      {"unpadded_tokens_per_step", "train/total_unpadded_tokens_per_batch"},
      {"mfu_seed", "train/mfu"},
      {"gpu_mem_peak_gib", "train/gpu_memory_peak_gib"},
      {"gpu_mem_allocated_max_gib", "train/gpu_memory_allocated_max_gb"},
      {"gpu_mem_allocated_mean_gib", "train/gpu_memory_allocated_mean_gb"},
      {"gpu_sm_clock_mhz", "gpu/sm_clock_mhz"},
      {"gpu_power_w", "gpu/power_w"},
      {"gpu_temperature_c", "gpu/temperature_c"},
      {"gpu_power_capped_fraction", "gpu/power_capped_fraction"},
      {"val_loss", "val/loss"},
      {"val_perplexity", "val/perplexity"},
      {"val_accuracy", "val/accuracy"},
  };
  if (!r.contains("timestamp")) r["timestamp"] = iso8601_utc(now);
  if (!r.contains("wall_time"))
    r["wall_time"] = std::chrono::duration<double>(now.time_since_epoch()).count();
  for (const auto& [ours, theirs] : kRecipeNames)
    if (r.contains(ours) && !r.contains(theirs)) r[theirs] = r[ours];
  // (a training record: validation-only and statistics-only records carry a step too)
  if ((r.contains("loss") || r.contains("no_target_tokens")) && r.contains("step") && !r.contains("train/global_step"))
    r["train/global_step"] = r["step"];
  return r;
}

void TensorBoardSink::write(const nlohmann::json& r) {
  std::vector<std::pair<std::string, float>> values;
  for (const auto& [key, v] : r.items())
    if (key.find('/') != std::string::npos && v.is_number()) values.emplace_back(key, v.get<float>());
  if (values.empty()) return;
  const int64_t step = r.value("step", int64_t(0));
  const double wall = r.contains("wall_time") ? r["wall_time"].get<double>()
                                              : std::chrono::duration<double>(
                                                    std::chrono::system_clock::now().time_since_epoch()).count();
  writer_.add_scalars(step, wall, values);
}

}  // namespace biofm
