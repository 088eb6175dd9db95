// Training metrics: the progress line, metrics.jsonl, and throughput accounting
// (tokens/s with and without padding, MFU by the seed formula and by 6·N).
#pragma once
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "biofm/data/batch.h"
#include "biofm/models/language_model.h"

namespace biofm {

constexpr double kPeakBf16Flops = 989e12;  // H100/H200 dense bf16, as the seeds use

// FLOPs of one training step (forward + backward) on a batch, by the seeds' formula
// (24·B·S·H² + 4·B·S²·H)·3·L + 6·B·S·H·V, with B·S = rows and B·S² = Σ over sequences of
// their slot length squared (the padded length in BSHD, the real length when packed).
double seed_formula_flops(const ModelDims& d, const Batch& b);

class MetricsLog {
 public:
  MetricsLog(const std::string& path, bool append);
  void write(const nlohmann::json& record);

 private:
  std::ofstream out_;
  std::string path_;
};

// Accumulates what happened since the last report.
class ThroughputWindow {
 public:
  explicit ThroughputWindow(const ModelDims& d) : dims_(d) { reset(); }
  void add_batch(const Batch& b);
  void add_step() { ++steps_; }
  void reset();
  // Prints the progress line and returns the metrics record of this window.
  nlohmann::json report(int64_t step, int64_t total_steps, double loss, double lr, double grad_norm, Device device);

 private:
  ModelDims dims_;
  std::chrono::steady_clock::time_point start_;
  int64_t steps_ = 0, rows_ = 0, real_ = 0;
  double flops_seed_ = 0;
};

}  // namespace biofm
