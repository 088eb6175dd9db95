// biofm bench: training-step throughput of a model shape on real data (random init), with
// the numbers the recipes report: real tokens/s, step time, MFU (seed formula and 6·N) and
// peak device memory. No checkpoints, no logging inside the timed region.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "biofm/cli/config_flags.h"
#include "biofm/cli/config_search.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/commands.h"
#include "biofm/core/gpu_monitor.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/profiling.h"
#include "biofm/io/atomic_file.h"
#include "biofm/ops/fp8/recipe.h"
#include "biofm/train/config.h"
#include "biofm/train/metrics.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/prefetch.h"
#include "biofm/train/setup.h"
#include "biofm/train/step.h"
#include "biofm/train/trainer.h"

namespace biofm {

namespace {

const std::map<std::string, std::string> kShapes = {
    {"esm2:8M", "esm2_t6_8M"},      {"esm2:35M", "esm2_t12_35M"}, {"esm2:150M", "esm2_t30_150M"},
    {"esm2:650M", "esm2_t33_650M"}, {"esm2:3B", "esm2_t36_3B"},   {"esm2:15B", "esm2_t48_15B"},
    {"llama:1B", "llama3_1b"},      {"llama:7B", "og2_7b"},
};

void device_sync(Device d) {
  if (d == Device::CUDA) {
    Tensor probe = Tensor::zeros({1}, DType::F32, d);
    (void)probe.to(Device::CPU);  // a device-to-host read waits for the stream
  }
}

// The overrides of the command line, in the order that decides: a shape's defaults (cuda,
// bf16-mixed; a --config-name config keeps its own), then key=value overrides, then the flags
// --device and --precision when given. (The other flags are appended after these.)
std::vector<std::string> device_and_precision(const Flags& a) {
  std::vector<std::string> ov;
  if (!a.has("--config-name")) ov = {"device=cuda", "precision=bf16-mixed"};
  for (const std::string& o : a.positional()) ov.push_back(o);
  if (a.has("--device")) ov.push_back("device=" + a.get("--device"));
  if (a.has("--precision")) ov.push_back("precision=" + a.get("--precision"));
  return ov;
}

}  // namespace

const CommandSpec kBenchSpec{
    .name = "bench",
    .synopsis =
        "--model esm2|llama --shape 8M|35M|150M|650M|3B|15B|1B|7B [--data FILE] [options] [key.sub=value ...]\n"
        "   or: biofm bench --config-name NAME [options] [key.sub=value ...] (any training config)",
    .summary = "training throughput (tokens/s, MFU, memory) of a model shape or a training config",
    .flags = {
        {"--model", "esm2|llama", "the family of --shape (default esm2)"},
        {"--shape", "SIZE", "a published shape of the family: 8M 35M 150M 650M 3B 15B (esm2), 1B 7B (llama)"},
        {"--config-name", "NAME", "bench a training config instead of a shape"},
        {"--config-dir", "DIR", "search DIR before the shipped configs"},
        {"--data", "FILE", "sequences to train on (dataset.path; default: the config's)"},
        {"--tokens-per-batch", "N", "dataset.max_tokens_per_batch (default: the config's)"},
        {"--max-seq-length", "N", "dataset.max_seq_length"},
        {"--packing", "thd|bshd", "dataset.packing: thd (packed) or bshd (padded)"},
        {"--micro-batch", "N", "BSHD sequences per micro batch"},
        {"--steps", "N", "timed steps (default 30)"},
        {"--warmup", "N", "untimed steps first (default 10)"},
        {"--precision", "fp32|bf16-mixed|bf16", "precision (default: the config's with --config-name, else bf16-mixed)"},
        {"--device", "cpu|cuda", "device (default: the config's with --config-name, else cuda)"},
        {"--recompute", "", "activation recompute"},
        {"--recompute-layers", "N", "with --recompute: only the first N layers"},
        {"--grad-acc", "N", "micro batches per optimizer step"},
        {"--fp8", "", "FP8 GEMMs (fp8_config.enabled=true)"},
        {"--json", "OUT", "also write the result as JSON"},
    },
    .details = "Times training steps (forward, backward, AdamW) from random init on real sequences. The flags\n"
               "above set config keys (--data: dataset.path, ...); key=value overrides set any other.",
    .help_tail = config_keys_help,
    .config_schema = train_config_schema,
};

int cmd_bench(int argc, char** argv) {
  const Flags a = parse_flags(kBenchSpec, argc, argv);
  if (a.help()) {
    print_help(kBenchSpec);
    return 0;
  }
  const int64_t steps = a.get_int("--steps", 30, 1, 1LL << 30), warmup = a.get_int("--warmup", 10, 0, 1LL << 30);
  std::string name = a.get("--config-name");
  if (name.empty()) {
    const std::string key = a.get("--model", "esm2") + ":" + a.require("--shape");
    auto it = kShapes.find(key);
    if (it == kShapes.end()) usage_fail("biofm bench: unknown shape '", key, "'; see biofm bench --help");
    name = it->second;
  }
  std::vector<std::string> ov = device_and_precision(a);
  if (a.has("--data")) ov.push_back("dataset.path=" + a.get("--data"));
  if (a.has("--tokens-per-batch")) ov.push_back("dataset.max_tokens_per_batch=" + a.get("--tokens-per-batch"));
  if (a.has("--max-seq-length")) ov.push_back("dataset.max_seq_length=" + a.get("--max-seq-length"));
  if (a.has("--packing")) ov.push_back("dataset.packing=" + a.get("--packing"));
  if (a.has("--micro-batch")) ov.push_back("dataset.micro_batch_size=" + a.get("--micro-batch"));
  if (a.has("--recompute")) ov.push_back("recompute=true");
  if (a.has("--fp8")) ov.push_back("fp8_config.enabled=true");
  if (a.has("--recompute-layers")) ov.push_back("recompute_layers=" + a.get("--recompute-layers"));
  if (a.has("--grad-acc")) ov.push_back("grad_acc_steps=" + a.get("--grad-acc"));
  ov.push_back("dataset.val_path=");
  ov.push_back("dataset.val_every_n_steps=0");
  check_config_overrides(ov);
  TrainConfig cfg = load_train_config_searched(config_search_path(a.get("--config-dir")), name, ov);
  const Device device = device_of(cfg);
  apply_op_options(cfg);
  if (device == Device::CUDA && !cuda_available()) fail("biofm bench: no CUDA device available; use --device cpu");

  ReaderOptions ro;
  ro.format = cfg.dataset.format;
  ro.column = cfg.dataset.column;
  SequenceDataset data = SequenceDataset::load(cfg.dataset.path, ro);
  auto source = make_batch_source(cfg, data);
  auto model = make_model(cfg, device);
  const AdamWConfig ac = adamw_config(cfg);
  AdamW opt(model->params(), ac);
  const bool adamw_ahead = apply_adamw_ahead(cfg, opt, *model, /*one_process=*/true);
  Prefetcher prefetch(*source, 4);
  const ModelDims dims = model->dims();
  TrainStep train_step(*model, opt);

  // (what runs, as train says it: the CPU computes in fp32 whatever the config asks)
  std::printf("biofm bench: %s (%s parameters) on %s (%s), %s %s, %lld tokens per batch, %lld+%lld steps\n",
              name.c_str(), parameter_count_text(dims.parameters).c_str(), device_name(device), describe_precision(cfg, device).c_str(),
              batch_mode_name(cfg.dataset.packing), cfg.recompute ? "recompute" : "no recompute",
              (long long)cfg.dataset.max_tokens_per_batch, (long long)warmup, (long long)steps);
  // Which recipe each layer runs (as train prints it): the banner's format alone does not say.
  const std::string by_layer =
      model->layer_quant().empty() ? std::string()
                                   : ops::describe_layer_quant(model->layer_quant(), device == Device::CPU ? "fp32" : "bf16");
  if (!by_layer.empty()) std::printf("precision by layer: %s\n", by_layer.c_str());
  if (device == Device::CUDA)
    std::printf("weight gradients on a second CUDA stream: %s (ops.wgrad_stream); AdamW one layer ahead: %s "
                "(ops.adamw_ahead)\n", cfg.ops.wgrad_stream ? "on" : "off", adamw_ahead ? "on" : "off");
  std::fflush(stdout);
  int64_t rows = 0, real = 0;
  double flops_seed = 0;
  std::chrono::steady_clock::time_point t0;
  ProfilerWindow::configure(cfg.profiler.start_step, cfg.profiler.end_step, 0);
  range_timer::set_enabled(cfg.profiler.range_times, device == Device::CUDA);
  std::unique_ptr<GpuMonitor> monitor;  // the GPU's clock and power over the timed steps
  for (int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      opt.settle();  // (AdamW ahead: the timed steps apply their own updates, the last one below)
      device_sync(device);
      device_memory_reset_peak();
      if (device == Device::CUDA) monitor = std::make_unique<GpuMonitor>();
      t0 = std::chrono::steady_clock::now();
    }
    std::vector<Batch> micro;
    for (int m = 0; m < cfg.grad_acc_steps; ++m) micro.push_back(prefetch.next());  // one optimizer step
    train_step.run(micro, ac.lr);
    if (s >= warmup) {
      for (const Batch& hb : micro) {
        rows += hb.num_rows();
        real += hb.num_real_tokens;
        flops_seed += seed_formula_flops(dims, hb);
      }
    }
  }
  opt.settle();
  device_sync(device);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const GpuActivity gpu = monitor ? monitor->stop() : GpuActivity{};
  const double loss = train_step.read_mean_loss();
  const DeviceMemoryStats mem = device_memory_stats();
  // On the CPU, MFU (a fraction of the GPU's bf16 peak), device memory and the second CUDA stream
  // neither are measured nor apply: null in the JSON, n/a in the line.
  const bool cuda = device == Device::CUDA;
  auto on_cuda = [cuda](const nlohmann::json& v) { return cuda ? v : nlohmann::json(); };
  nlohmann::json r = {
      {"config", name},
      {"parameters", dims.parameters},
      {"device", device_name(device)},
      {"precision", precision_name(precision_for(cfg, device))},
      {"fp8", cfg.fp8_config.enabled ? cfg.fp8_config.fp8_format : "off"},
      {"precision_by_layer", by_layer},
      {"packing", batch_mode_name(cfg.dataset.packing)},
      {"recompute", cfg.recompute},
      {"tokens_per_batch", cfg.dataset.max_tokens_per_batch},
      {"grad_acc_steps", cfg.grad_acc_steps},
      {"recompute_layers", cfg.recompute_layers},
      {"wgrad_stream", on_cuda(cfg.ops.wgrad_stream)},  // weight gradients beside (core/side_stream.h)
      {"adamw_ahead", adamw_ahead},  // the update applied one layer ahead (train/optimizer.h)
      {"steps", steps},
      {"step_time_s", secs / double(steps)},
      {"real_tokens_per_sec", double(real) / secs},
      {"padded_tokens_per_sec", double(rows) / secs},
      {"padding_fraction", rows ? 1.0 - double(real) / double(rows) : 0.0},
      {"mfu_seed", on_cuda(flops_seed / secs / kPeakBf16Flops)},
      {"mfu_6n", on_cuda(6.0 * double(dims.parameters) * double(real) / secs / kPeakBf16Flops)},
      {"peak_mem_gib", on_cuda(double(mem.peak_allocated_bytes) / double(1ull << 30))},
      {"peak_reserved_gib", on_cuda(double(mem.peak_reserved_bytes) / double(1ull << 30))},
      {"last_loss", loss},
      {"last_loss_finite", std::isfinite(loss)},
  };
  if (monitor && !gpu.available)
    r["gpu"] = {{"available", false}, {"why", gpu.why}};
  else if (monitor)
    r["gpu"] = {{"available", true},
                {"samples", gpu.samples},
                {"sm_clock_median_mhz", gpu.sm_clock_median_mhz},
                {"sm_clock_min_mhz", gpu.sm_clock_min_mhz},
                {"sm_clock_max_mhz", gpu.sm_clock_max_mhz},
                {"sm_clock_limit_mhz", gpu.sm_clock_limit_mhz},
                {"power_median_w", gpu.power_median_w},
                {"power_max_w", gpu.power_max_w},
                {"power_limit_w", gpu.power_limit_w},
                {"power_capped_fraction", gpu.power_capped_fraction},
                {"thermal_fraction", gpu.thermal_fraction},
                {"temperature_max_c", gpu.temperature_max_c}};
  char gpu_figures[96] = "MFU n/a | peak n/a";
  if (cuda)
    std::snprintf(gpu_figures, sizeof gpu_figures, "MFU %.1f%% (seed) / %.1f%% (6N) | peak %.1f GiB",
                  100 * r["mfu_seed"].get<double>(), 100 * r["mfu_6n"].get<double>(), r["peak_mem_gib"].get<double>());
  std::printf("biofm %s: %.0f real tok/s | %.0f padded tok/s | %.1f%% padding | step %.3f s | %s\n", name.c_str(),
              r["real_tokens_per_sec"].get<double>(), r["padded_tokens_per_sec"].get<double>(),
              100 * r["padding_fraction"].get<double>(), r["step_time_s"].get<double>(), gpu_figures);
  if (monitor) std::printf("GPU during the timed steps: %s\n", describe(gpu).c_str());
  // profiler.range_times: the window's per-range times (steps counted from the first warm-up step).
  if (auto t = ProfilerWindow::take_timed(/*close=*/true)) {
    std::printf("%s", range_timer::format_table(t->rows, t->last - t->first + 1,
                                                "range times of steps " + std::to_string(t->first) + "-" +
                                                    std::to_string(t->last) + " (warm-up steps included in the count), per step")
                          .c_str());
    r["range_times"] = nlohmann::json::parse(range_timer::to_json(t->rows, t->first, t->last, 0, device == Device::CUDA));
  }
  if (a.has("--json")) write_file_atomic(a.get("--json"), r.dump(2) + "\n");
  return 0;
}

}  // namespace biofm
