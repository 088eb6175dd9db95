#include "biofm/train/trainer.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
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

// SIGTERM/SIGINT: the first asks the loop to stop after the current step (with a checkpoint);
// a second exits at once. Checkpoints are renamed into place only when whole, so an
// immediate exit leaves only complete ones (and a .tmp_step_* directory removed next start).
std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal.exchange(sig) != 0) _exit(128 + sig);
  static const char msg[] = "\nbiofm train: stopping after this step (a checkpoint is written; signal again to exit now)\n";
  ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
  (void)ignored;
}

// Installs the handlers for the lifetime of a run; restores the previous ones after.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
  }
  ~StopSignals() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
  }
  int received() const { return g_stop_signal.load(); }

 private:
  struct sigaction old_term_ {}, old_int_ {};
};

// After a resume at `step`, keeps only the records of steps <= step: the steps after it are
// redone and logged again.
void truncate_metrics(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  size_t dropped = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json rec = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool later = rec.is_object() && rec.contains("step") && rec["step"].is_number_integer() &&
                       rec["step"].get<int64_t>() > step;
    const bool broken = rec.is_discarded();  // e.g. a line cut by a kill
    if (later || broken) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  in.close();
  if (dropped == 0) return;
  write_file_atomic(path, kept);
  std::printf("metrics: dropped %zu record(s) after step %lld from %s (those steps are redone)\n", dropped,
              (long long)step, path.c_str());
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
  std::unique_ptr<LanguageModel> model;
  try {
    model = make_model(cfg, device);
  } catch (const std::bad_alloc&) {
    fail("not enough memory for the model of model.config (hidden_size ", cfg.model.config.hidden_size,
         ", num_hidden_layers ", cfg.model.config.num_hidden_layers, ", intermediate_size ",
         cfg.model.config.intermediate_size, "); reduce its sizes");
  }
  // Sequences longer than the model's positions would only make batches (and time and
  // memory) grow without bound; say so before any work.
  if (cfg.dataset.max_seq_length > model->dims().max_positions)
    fail("dataset.max_seq_length (", cfg.dataset.max_seq_length, ") exceeds the model's max_position_embeddings (",
         model->dims().max_positions, "); lower dataset.max_seq_length or raise model.config.max_position_embeddings");
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
  remove_stale_tmp_dirs(ckpt_dir);
  int64_t step = 0;
  std::string resumed_from;
  if (cfg.checkpoint.resume_from_checkpoint) {
    const auto candidates = list_checkpoints(ckpt_dir);
    if (auto st = resume_training_checkpoint(ckpt_dir, *model, opt, &resumed_from)) {
      step = st->step;
      data->set_cursor(st->data_cursor);
      const bool older = resumed_from != candidates.back().second;
      std::printf("resumed from %s (step %lld, data cursor %llu)%s\n", resumed_from.c_str(), (long long)step,
                  (unsigned long long)st->data_cursor,
                  older ? "; newer checkpoints failed to load (warnings above), an older one is used" : "");
    } else if (!candidates.empty()) {
      std::printf("no usable checkpoint in %s (%zu failed to load, warnings above): starting from step 0\n",
                  ckpt_dir.c_str(), candidates.size());
    }
  }
  if (step > cfg.num_train_steps)
    fail("the checkpoint ", resumed_from, " is at step ", step, ", past num_train_steps=", cfg.num_train_steps,
         "; raise num_train_steps, use another checkpoint.ckpt_dir, or set checkpoint.resume_from_checkpoint=false");
  if (step > 0 && !cfg.metrics_path().empty()) truncate_metrics(cfg.metrics_path(), step);
  if (step > 0 && step == cfg.num_train_steps)
    std::printf("nothing to train: %s is at step %lld = num_train_steps\n", resumed_from.c_str(), (long long)step);
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
  StopSignals signals;
  bool stopped = false;

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
        // (names the step; the last checkpoint, if any, is the state before the divergence)
        ++summary.skipped_nonfinite_steps;
        std::fprintf(stderr, "warning: step %lld: non-finite loss %g or grad norm %g; the update was skipped\n",
                     (long long)done, loss, gnorm);
        if (++bad_checks >= 10)
          fail("training diverged: non-finite loss or gradients at 10 consecutive checks (step ", done,
               "); lower optimizer.lr or check the data. ",
               !summary.last_checkpoint.empty() ? "The last checkpoint is " + summary.last_checkpoint
               : !resumed_from.empty()          ? "The last checkpoint is " + resumed_from
                                                : std::string("No checkpoint was saved."));
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
    const bool stop_now = signals.received() != 0;
    if ((cfg.checkpoint.save_every_n_steps > 0 && done % cfg.checkpoint.save_every_n_steps == 0) || stop_now) {
      TrainerState st{done, prefetch->cursor(), json{{"seed", cfg.seed}, {"epoch", epoch_now()}}.dump(), to_yaml(cfg)};
      try {
        summary.last_checkpoint =
            save_training_checkpoint(ckpt_dir, st, *model, opt, cfg.checkpoint.max_checkpoints);
      } catch (const std::exception& e) {
        // The writer removes its temporary directory; sweep any other leftovers too.
        remove_stale_tmp_dirs(ckpt_dir);
        fail("saving the checkpoint of step ", done, " in ", ckpt_dir, " failed: ", e.what());
      }
      std::printf("  checkpoint saved: %s\n", summary.last_checkpoint.c_str());
    }
    if (stop_now) {
      std::printf("stopped by signal %d after step %lld; resume with the same command\n", signals.received(),
                  (long long)done);
      stopped = true;
      ++step;
      break;
    }
  }
  summary.end_step = step;
  summary.wall_seconds = seconds_since(t_start);
  prefetch.reset();  // the source is ours again (its counters are read below)
  if (cfg.checkpoint.save_final_model && !stopped) {
    summary.final_model_dir = out_dir + "/final_model";
    export_final_model(*model, out_dir, summary.final_model_dir);
  }
  std::printf("data: %s\n", data->summary().c_str());
  if (have_first)
    std::printf("done: %lld steps in %.1f s | loss %.4f -> %.4f\n", (long long)(summary.end_step - summary.start_step),
                summary.wall_seconds, summary.first_loss, summary.last_loss);
  else
    std::printf("done: %lld steps in %.1f s (no finite loss was read)\n",
                (long long)(summary.end_step - summary.start_step), summary.wall_seconds);
  std::printf("metrics: %s\n", cfg.metrics_path().c_str());
  if (!summary.last_checkpoint.empty()) std::printf("checkpoints: %s\n", ckpt_dir.c_str());
  if (!summary.final_model_dir.empty())
    std::printf("final model (Hugging Face format): %s\n", summary.final_model_dir.c_str());
  return summary;
}

}  // namespace biofm
