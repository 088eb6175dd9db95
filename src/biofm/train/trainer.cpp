#include "biofm/train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "biofm/core/device_memory.h"
#include "biofm/io/atomic_file.h"
#include "biofm/train/setup.h"
#include "biofm/train/step.h"
#include "biofm/train/checkpoint.h"
#include "biofm/train/metrics.h"
#include "biofm/core/profiling.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/prefetch.h"
#include "biofm/train/upload.h"
#include "biofm/train/schedule.h"

extern "C" void openblas_set_num_threads(int);

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace biofm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Masked- or causal-LM loss (and accuracy) over the whole held-out set.
json evaluate_held_out(LanguageModel& model, BatchSource& data, int64_t max_batches) {
  data.reset_eval();
  Batch b;
  LossSums total;
  int64_t n = 0;
  while ((max_batches <= 0 || n < max_batches) && data.next_eval(b)) {
    LossSums s = model.evaluate(b.to(model.device()), true);
    total.loss_sum += s.loss_sum;
    total.num_tokens += s.num_tokens;
    total.num_correct += s.num_correct;
    ++n;
  }
  if (max_batches > 0) data.reset_eval();
  const double loss = total.num_tokens ? total.loss_sum / double(total.num_tokens) : NAN;
  return {{"val_loss", loss},
          {"val_perplexity", std::exp(loss)},
          {"val_accuracy", total.num_tokens ? double(total.num_correct) / double(total.num_tokens) : NAN},
          {"val_tokens", total.num_tokens}};
}

void export_final_model(const LanguageModel& model, const std::string& out_dir, const std::string& final_dir) {
  const std::string tmp = out_dir + "/.final_model.tmp";
  fs::remove_all(tmp);
  model.save_hf_dir(tmp);
  fsync_dir(tmp);
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);
}

}  // namespace

AdamWConfig adamw_config(const TrainConfig& cfg) {
  AdamWConfig ac;
  ac.lr = float(cfg.optimizer.lr);
  ac.beta1 = float(cfg.optimizer.betas.at(0));
  ac.beta2 = float(cfg.optimizer.betas.at(1));
  ac.eps = float(cfg.optimizer.eps);
  ac.weight_decay = float(cfg.optimizer.weight_decay);
  ac.max_grad_norm = float(cfg.clip_grad_norm);
  return ac;
}

TrainSummary run_training(const TrainConfig& cfg) {
  const Device device = device_of(cfg);
  apply_op_options(cfg);
  if (device == Device::CUDA && !cuda_available())
    fail("device=cuda but this biofm has no CUDA backend or no GPU is visible; use device=cpu");
  if (cfg.num_threads > 0) {
    omp_set_num_threads(cfg.num_threads);
    openblas_set_num_threads(cfg.num_threads);
  }

  // Everything that can fail on bad input fails here, before any output is written.
  ReaderOptions ro;
  ro.format = cfg.dataset.format;
  ro.column = cfg.dataset.column;
  SequenceDataset train_set = SequenceDataset::load(cfg.dataset.path, ro);
  std::unique_ptr<SequenceDataset> val_set;
  if (!cfg.dataset.val_path.empty())
    val_set = std::make_unique<SequenceDataset>(SequenceDataset::load(cfg.dataset.val_path, ro));
  std::unique_ptr<BatchSource> data = make_batch_source(cfg, train_set);
  std::unique_ptr<BatchSource> val_data = val_set ? make_batch_source(cfg, *val_set) : nullptr;
  std::unique_ptr<LanguageModel> model = make_model(cfg, device);
  const std::string out_dir = cfg.output_dir;
  const std::string ckpt_dir = cfg.resolved_ckpt_dir();
  make_dirs_writable(out_dir);
  make_dirs_writable(ckpt_dir);

  const AdamWConfig ac = adamw_config(cfg);
  AdamW opt(model->params(), ac);
  const ScheduleSpec sched{cfg.scheduler.type, cfg.scheduler.warmup_steps, cfg.num_train_steps,
                           cfg.scheduler.decay_fraction, cfg.scheduler.min_lr_ratio};

  TrainSummary summary;
  summary.ckpt_dir = ckpt_dir;
  int64_t step = 0;
  if (cfg.checkpoint.resume_from_checkpoint) {
    std::string chosen;
    if (auto st = resume_training_checkpoint(ckpt_dir, *model, opt, &chosen)) {
      step = st->step;
      data->set_cursor(st->data_cursor);
      std::printf("resumed from %s (step %lld, data cursor %llu)\n", chosen.c_str(), (long long)step,
                  (unsigned long long)st->data_cursor);
    }
  }
  // Tokenizing, masking and packing run ahead on a background thread from here on.
  auto prefetch = std::make_unique<Prefetcher>(*data, 4);
  auto epoch_now = [&] { return prefetch->cursor() / data->samples_per_epoch(); };
  MetricSinks metrics;
  metrics.add(std::make_unique<ProgressLineSink>());
  if (!cfg.metrics_path().empty()) metrics.add(std::make_unique<JsonlSink>(cfg.metrics_path(), /*append=*/step > 0));
  if (cfg.logger.tensorboard) metrics.add(std::make_unique<TensorBoardSink>(out_dir + "/tensorboard"));
  ProfilerWindow::configure(cfg.profiler.start_step, cfg.profiler.end_step, step);
  write_file_atomic(out_dir + "/config.yaml", to_yaml(cfg));

  const ModelDims dims = model->dims();
  const std::string fp8 = cfg.fp8_config.enabled ? ", FP8 " + cfg.fp8_config.fp8_format +
                                                      (device == Device::CPU ? " emulated" : "")
                                                : "";
  std::printf("biofm train: %s, %lld layers, hidden %lld, %.1fM parameters on %s (%s%s) | data %s: %llu sequences\n",
              model->family().c_str(), (long long)dims.layers, (long long)dims.hidden,
              double(dims.parameters) / 1e6, device_name(device),
              precision_name(precision_for(cfg, device)), fp8.c_str(),
              cfg.dataset.path.c_str(), (unsigned long long)train_set.size());
  std::fflush(stdout);

  summary.start_step = step;
  const auto t_start = Clock::now();
  TrainStep train_step(*model, opt);
  ThroughputWindow window(dims);
  // On the CPU a host read costs nothing, so every step is checked for non-finite values;
  // on a GPU the check rides on the logging reads (the update itself is skipped on device).
  const int64_t check_every = device == Device::CPU ? 1 : cfg.logger.frequency;
  int64_t bad_checks = 0;
  bool have_first = false;

  for (; step < cfg.num_train_steps; ++step) {
    std::vector<Batch> micro;
    for (int64_t a = 0; a < cfg.grad_acc_steps; ++a) {
      micro.push_back(prefetch->next());
      window.add_batch(micro.back());
    }
    const double lr = cfg.optimizer.lr * lr_multiplier(sched, step);
    train_step.run(micro, lr);
    window.add_step();

    const int64_t done = step + 1;
    const bool log_now = done % cfg.logger.frequency == 0 || done == cfg.num_train_steps;
    const bool validate_now = val_data && cfg.dataset.val_every_n_steps > 0 && done % cfg.dataset.val_every_n_steps == 0;
    json rec;
    if (log_now || done % check_every == 0) {
      const double loss = train_step.read_mean_loss();
      const double gnorm = opt.read_grad_norm();
      if (!std::isfinite(loss) || !std::isfinite(gnorm)) {
        ++summary.skipped_nonfinite_steps;
        std::fprintf(stderr, "warning: step %lld: non-finite loss %g or grad norm %g; the update was skipped\n",
                     (long long)done, loss, gnorm);
        if (++bad_checks >= 10)
          fail("training diverged: non-finite loss or gradients at 10 consecutive checks (step ", done,
               "); lower optimizer.lr or check the data. The last good checkpoint is in ", ckpt_dir);
      } else {
        bad_checks = 0;
        if (!have_first) summary.first_loss = loss, have_first = true;
        summary.last_loss = loss;
      }
      if (log_now) {
        rec = window.report(done, cfg.num_train_steps, loss, lr, gnorm, device);
        rec["epoch"] = epoch_now();
        rec["elapsed"] = seconds_since(t_start);
        window.reset();
      }
    }
    if (validate_now) {  // on its own schedule, whatever logger.frequency is
      if (rec.is_null()) rec = {{"step", done}, {"elapsed", seconds_since(t_start)}};
      rec.update(evaluate_held_out(*model, *val_data, cfg.dataset.val_max_batches));
    }
    if (!rec.is_null()) metrics.write(rec);
    if (cfg.checkpoint.save_every_n_steps > 0 && done % cfg.checkpoint.save_every_n_steps == 0) {
      TrainerState st{done, prefetch->cursor(), json{{"seed", cfg.seed}, {"epoch", epoch_now()}}.dump(), to_yaml(cfg)};
      summary.last_checkpoint =
          save_training_checkpoint(ckpt_dir, st, *model, opt, cfg.checkpoint.max_checkpoints);
      std::printf("  checkpoint saved: %s\n", summary.last_checkpoint.c_str());
    }
  }
  summary.end_step = step;
  summary.wall_seconds = seconds_since(t_start);
  prefetch.reset();  // the source is ours again (its counters are read below)
  if (cfg.checkpoint.save_final_model) {
    summary.final_model_dir = out_dir + "/final_model";
    export_final_model(*model, out_dir, summary.final_model_dir);
  }
  std::printf("data: %s\n", data->summary().c_str());
  std::printf("done: %lld steps in %.1f s | loss %.4f -> %.4f\n", (long long)(summary.end_step - summary.start_step),
              summary.wall_seconds, summary.first_loss, summary.last_loss);
  std::printf("metrics: %s\n", cfg.metrics_path().c_str());
  if (!summary.last_checkpoint.empty()) std::printf("checkpoints: %s\n", ckpt_dir.c_str());
  if (!summary.final_model_dir.empty())
    std::printf("final model (Hugging Face format): %s\n", summary.final_model_dir.c_str());
  return summary;
}

}  // namespace biofm
