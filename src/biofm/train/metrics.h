// Training metrics: the progress line, metrics.jsonl, and throughput accounting
// (tokens/s with and without padding, MFU by the seed formula and by 6·N).
#pragma once
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "biofm/core/gpu_monitor.h"
#include "biofm/data/batch.h"
#include "biofm/models/language_model.h"
#include "biofm/train/tensorboard.h"

namespace biofm {

constexpr double kPeakBf16Flops = 989e12;  // H100/H200 dense bf16, as the seeds use

// FLOPs of one training step (forward + backward) on a batch, by the seeds' formula
// (24·B·S·H² + 4·B·S²·H)·3·L + 6·B·S·H·V, with B·S = rows and B·S² = Σ over sequences of
// their slot length squared (the padded length in BSHD, the real length when packed).
double seed_formula_flops(const ModelDims& d, const Batch& b);

// Where metric records go: each sink gets every record (progress line, metrics.jsonl; more
// sinks — TensorBoard, W&B — plug in here).
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void write(const nlohmann::json& record) = 0;
};

// One JSON object per line, flushed per record.
class JsonlSink : public MetricSink {
 public:
  JsonlSink(const std::string& path, bool append);
  void write(const nlohmann::json& record) override;

 private:
  std::ofstream out_;
  std::string path_;
};

// The lines of a JSONL file's text (metrics.jsonl), blank ones included so that index + 1 is
// the line number. JsonlSink ends every record with a newline, so a last line without one that
// does not parse was cut short by a kill: it is left out of `lines` and `cut_tail` says so
// (readers tolerate it; any other line is theirs to judge).
struct JsonlText {
  std::vector<std::string> lines;
  bool cut_tail = false;
};
JsonlText split_jsonl(const std::string& text);

// The human-readable progress line on stdout (training records: step, loss, lr, throughput,
// memory, ETA; validation records: loss, perplexity, accuracy).
class ProgressLineSink : public MetricSink {
 public:
  void write(const nlohmann::json& record) override;
};

// TensorBoard scalars: every numeric key with a '/' (the recipes' names, train/loss, val/loss,
// ...) at the record's step and wall_time, in <dir>/events.out.tfevents.*.
class TensorBoardSink : public MetricSink {
 public:
  explicit TensorBoardSink(const std::string& dir) : writer_(dir) {}
  void write(const nlohmann::json& record) override;
  const std::string& path() const { return writer_.path(); }

 private:
  TfEventWriter writer_;
};

// exp(loss), the loss capped at kMaxLogPerplexity first so that a diverging run logs a large
// finite number (JSON has no inf; TensorBoard stores floats) instead of inf; NaN stays NaN.
constexpr double kMaxLogPerplexity = 80.0;  // e^80 ~ 5.5e34 < FLT_MAX
double perplexity_of(double loss);
// A perplexity as the progress lines print it: "12.183" below 1e6, else "5.54e+34" (a
// diverging run's, which %f would print with 35 digits), "nan".
std::string perplexity_text(double ppl);

// Adds what every record carries: `timestamp` (ISO 8601 UTC), `wall_time` (seconds since the
// epoch) and the BioNeMo recipes' names beside ours, as their perf_logger.py writes them:
// train/loss = loss, train/perplexity, train/learning_rate = lr, train/grad_norm,
// train/step_time (seconds per optimizer step over the window), train/global_step = step (training
// records only), train/tokens_per_second_per_gpu, train/unpadded_tokens_per_second_per_gpu,
// train/total_unpadded_tokens_per_batch (non-pad tokens per optimizer step, summed over ranks),
// train/gpu_memory_allocated_max_gb / _mean_gb, train/mfu = mfu_seed (with log_mfu also
// train/mfu_pct and train/tflops_per_gpu: ThroughputWindow); our train/gpu_memory_peak_gib
// (the run's peak, which `biofm report` charts); val/loss, val/perplexity, val/accuracy.
nlohmann::json with_standard_keys(nlohmann::json record,
                                  std::chrono::system_clock::time_point now = std::chrono::system_clock::now());
// "2026-11-23T02:48:41.123Z"
std::string iso8601_utc(std::chrono::system_clock::time_point t);

// Sends each record, with the standard keys, to every sink.
class MetricSinks {
 public:
  void add(std::unique_ptr<MetricSink> s) { sinks_.push_back(std::move(s)); }
  void write(const nlohmann::json& record) {
    const nlohmann::json full = with_standard_keys(record);
    for (auto& s : sinks_) s->write(full);
  }

 private:
  std::vector<std::unique_ptr<MetricSink>> sinks_;
};

// Accumulates what happened since the last report.
class ThroughputWindow {
 public:
  // watch_gpu: also sample the GPU's clock and power over each window (core/gpu_monitor.h).
  // log_mfu: also the recipes' "train/mfu_pct" (percent) and "train/tflops_per_gpu" (this rank's
  // seed-formula FLOPs per second, the FLOPs MFU counts, in TFLOP/s).
  explicit ThroughputWindow(const ModelDims& d, bool watch_gpu = false, bool log_mfu = false)
      : dims_(d), watch_gpu_(watch_gpu), log_mfu_(log_mfu) {
    reset();
  }
  void add_batch(const Batch& b);
  void add_step() { ++steps_; }
  void reset();
  // The metrics record of this window (throughput, MFU, memory, ETA in "eta_s"; with watch_gpu
  // the window's median SM clock and power, highest temperature and power-capped fraction).
  // Also "unpadded_tokens_per_step" (non-pad tokens per optimizer step, the window's mean) and on
  // CUDA "gpu_mem_peak_gib" (the peak since the run's first window), "gpu_mem_allocated_max_gib"
  // (this window's peak; the device's peak counter starts again) and "gpu_mem_allocated_mean_gib"
  // (allocated now): this rank's; a multi-process trainer replaces unpadded_tokens_per_step,
  // gpu_mem_allocated_max_gib and gpu_mem_allocated_mean_gib with the sum, the largest and the
  // mean over ranks (gpu_mem_peak_gib stays rank 0's).
  nlohmann::json report(int64_t step, int64_t total_steps, double loss, double lr, double grad_norm, Device device);

 private:
  ModelDims dims_;
  bool watch_gpu_ = false, log_mfu_ = false;
  std::unique_ptr<GpuMonitor> gpu_;
  std::chrono::steady_clock::time_point start_;
  int64_t steps_ = 0, rows_ = 0, real_ = 0;
  double flops_seed_ = 0;
  size_t run_peak_bytes_ = 0;  // the largest window peak so far (not reset)
};

}  // namespace biofm
