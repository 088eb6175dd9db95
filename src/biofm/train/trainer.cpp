#include "biofm/train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "biofm/core/device_memory.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/io/atomic_file.h"
#include "biofm/models/esm2/model.h"
#include "biofm/models/esm2/tokenizer_files.h"
#include "biofm/train/checkpoint.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/schedule.h"

extern "C" void openblas_set_num_threads(int);

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace biofm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string format_eta(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  int h = int(s / 3600), m = int(std::fmod(s, 3600) / 60), sec = int(std::fmod(s, 60));
  if (h)
    std::snprintf(buf, sizeof buf, "%dh%02dm", h, m);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", m, sec);
  return buf;
}

Esm2Config esm2_config_from(const TrainConfig& cfg) {
  const auto& m = cfg.model.config;
  Esm2Config c;
  c.vocab_size = int(m.vocab_size);
  c.hidden_size = int(m.hidden_size);
  c.num_hidden_layers = int(m.num_hidden_layers);
  c.num_attention_heads = int(m.num_attention_heads);
  c.intermediate_size = int(m.intermediate_size);
  c.max_position_embeddings = int(m.max_position_embeddings);
  c.layer_norm_eps = float(m.layer_norm_eps);
  c.initializer_range = float(m.initializer_range);
  c.token_dropout = m.token_dropout;
  c.validate();
  return c;
}

MlmOptions mlm_options_from(const TrainConfig& cfg) {
  MlmOptions o;
  o.seed = uint64_t(cfg.seed);
  o.max_seq_length = cfg.dataset.max_seq_length;
  o.mlm_probability = cfg.dataset.mlm_probability;
  o.mode = parse_batch_mode(cfg.dataset.packing);
  o.max_tokens_per_batch = cfg.dataset.max_tokens_per_batch;
  o.micro_batch_size = cfg.dataset.micro_batch_size;
  o.pad_to_multiple_of = cfg.dataset.pad_to_multiple_of;
  o.shuffle = cfg.dataset.shuffle;
  validate(o);
  return o;
}

// Masked-LM loss, accuracy and perplexity over a whole held-out set, deterministic masking.
json evaluate_mlm(Esm2Model& model, MlmBatcher& batcher, int64_t max_batches) {
  batcher.reset_eval();
  Batch b;
  LossSums total;
  int64_t n = 0;
  while ((max_batches <= 0 || n < max_batches) && batcher.next_eval(b)) {
    LossSums s = model.evaluate(b.to(model.device()), true);
    total.loss_sum += s.loss_sum;
    total.num_tokens += s.num_tokens;
    total.num_correct += s.num_correct;
    ++n;
  }
  double loss = total.num_tokens ? total.loss_sum / double(total.num_tokens) : NAN;
  return {{"val_loss", loss},
          {"val_perplexity", std::exp(loss)},
          {"val_accuracy", total.num_tokens ? double(total.num_correct) / double(total.num_tokens) : NAN},
          {"val_tokens", total.num_tokens}};
}

}  // namespace

TrainSummary run_training(const TrainConfig& cfg) {
  if (cfg.model.family != "esm2")
    fail("model.family '", cfg.model.family, "' is not trainable yet (supported: esm2)");
  const Device device = cfg.device == "cuda" ? Device::CUDA : Device::CPU;
  if (device == Device::CUDA && !cuda_available())
    fail("device=cuda but this biofm has no CUDA backend or no GPU is visible; use device=cpu");
  if (cfg.num_threads > 0) {
    omp_set_num_threads(int(cfg.num_threads));
    openblas_set_num_threads(int(cfg.num_threads));
  }

  // Everything that can fail on bad input fails here, before any work.
  const std::string out_dir = cfg.output_dir;
  const std::string ckpt_dir = cfg.checkpoint.ckpt_dir.empty() ? out_dir + "/checkpoints" : cfg.checkpoint.ckpt_dir;
  ReaderOptions ro;
  ro.format = cfg.dataset.format;
  ro.column = cfg.dataset.column;
  SequenceDataset train_set = SequenceDataset::load(cfg.dataset.path, ro);
  std::unique_ptr<SequenceDataset> val_set;
  if (!cfg.dataset.val_path.empty())
    val_set = std::make_unique<SequenceDataset>(SequenceDataset::load(cfg.dataset.val_path, ro));
  const MlmOptions mopt = mlm_options_from(cfg);
  // Output locations are created only once the inputs are known to be good.
  make_dirs_writable(out_dir);
  make_dirs_writable(ckpt_dir);

  Esm2Model model = cfg.model.init_from.empty() ? Esm2Model(esm2_config_from(cfg), device)
                                                : Esm2Model::from_hf_dir(cfg.model.init_from, device);
  if (cfg.model.init_from.empty()) model.params().init(uint64_t(cfg.seed));
  if (mopt.max_seq_length > model.config().max_position_embeddings)
    fail("dataset.max_seq_length ", mopt.max_seq_length, " exceeds model max_position_embeddings ",
         model.config().max_position_embeddings);

  AdamWConfig ac;
  ac.lr = float(cfg.optimizer.lr);
  ac.beta1 = float(cfg.optimizer.betas.at(0));
  ac.beta2 = float(cfg.optimizer.betas.at(1));
  ac.eps = float(cfg.optimizer.eps);
  ac.weight_decay = float(cfg.optimizer.weight_decay);
  AdamW opt(model.params(), ac);
  ScheduleSpec sched{cfg.scheduler.type, cfg.scheduler.warmup_steps, cfg.num_train_steps,
                     cfg.scheduler.decay_fraction, cfg.scheduler.min_lr_ratio};

  MlmBatcher batcher(train_set, mopt);
  std::unique_ptr<MlmBatcher> val_batcher;
  if (val_set) val_batcher = std::make_unique<MlmBatcher>(*val_set, mopt);

  TrainSummary summary;
  summary.ckpt_dir = ckpt_dir;
  int64_t step = 0;
  const std::string metrics_path = out_dir + "/" + cfg.logger.metrics_file;
  if (cfg.checkpoint.resume_from_checkpoint) {
    std::string chosen;
    if (auto c = load_latest_checkpoint(ckpt_dir, &chosen)) {
      auto& m = c->files.at("model");
      SafetensorsFile f;
      f.tensors = m;
      f.source = chosen + "/model.safetensors";
      model.params().load(f, nullptr);
      opt.load_state(c->files.at("optimizer"), c->step);
      step = c->step;
      batcher.set_cursor(c->data_cursor);
      std::printf("resumed from %s (step %lld, data cursor %llu)\n", chosen.c_str(), (long long)step,
                  (unsigned long long)c->data_cursor);
    }
  }
  if (step == 0) {
    // A fresh run starts a fresh metrics file.
    std::ofstream(metrics_path, std::ios::trunc);
  }
  std::ofstream metrics(metrics_path, std::ios::app);
  if (!metrics) fail("cannot write metrics file '", metrics_path, "'");
  write_file_atomic(out_dir + "/config.yaml", to_yaml(cfg));

  std::printf("biofm train: ESM-2 %d layers, hidden %d, %lld parameters on %s | data %s: %llu sequences\n",
              model.config().num_hidden_layers, model.config().hidden_size,
              (long long)model.config().num_parameters(), device_name(device), cfg.dataset.path.c_str(),
              (unsigned long long)train_set.size());
  std::fflush(stdout);

  summary.start_step = step;
  const auto t_start = Clock::now();
  auto t_log = Clock::now();
  int64_t log_rows = 0, log_real = 0, log_steps = 0;
  double step_time_avg = 0;
  int64_t consecutive_bad = 0;
  bool have_first = false;

  for (; step < cfg.num_train_steps; ++step) {
    const auto t_step = Clock::now();
    model.params().zero_grad();
    std::vector<Batch> micro;
    int64_t label_tokens = 0;
    for (int64_t a = 0; a < cfg.grad_acc_steps; ++a) {
      micro.push_back(batcher.next().to(device));
      label_tokens += micro.back().num_label_tokens;
    }
    LossSums sums;
    for (const Batch& b : micro) {
      if (label_tokens == 0) break;
      LossSums s = model.forward_backward(b, 1.0f / float(label_tokens));
      sums.loss_sum += s.loss_sum;
      sums.num_tokens += s.num_tokens;
      log_rows += b.num_rows();
      log_real += b.num_real_tokens;
    }
    const double loss = sums.num_tokens ? sums.loss_sum / double(sums.num_tokens) : NAN;
    const double gnorm = global_grad_norm(model.params());
    const double lr = cfg.optimizer.lr * lr_multiplier(sched, step);
    if (!std::isfinite(loss) || !std::isfinite(gnorm)) {
      ++summary.skipped_nonfinite_steps;
      std::fprintf(stderr, "warning: step %lld: non-finite loss %g or grad norm %g; update skipped\n",
                   (long long)step + 1, loss, gnorm);
      if (++consecutive_bad >= 10)
        fail("training diverged: 10 consecutive steps with non-finite loss or gradients (step ", step + 1,
             "); lower optimizer.lr or check the data. The last good checkpoint is in ", ckpt_dir);
      continue;
    }
    consecutive_bad = 0;
    clip_grad_norm(model.params(), gnorm, cfg.clip_grad_norm);
    opt.step(float(lr));
    if (!have_first) {
      summary.first_loss = loss;
      have_first = true;
    }
    summary.last_loss = loss;
    const double dt = seconds_since(t_step);
    step_time_avg = log_steps == 0 && step == summary.start_step ? dt : 0.9 * step_time_avg + 0.1 * dt;
    ++log_steps;

    const int64_t done = step + 1;
    const bool log_now = done % cfg.logger.frequency == 0 || done == cfg.num_train_steps;
    if (log_now) {
      const double span = seconds_since(t_log);
      json rec = {{"step", done},
                  {"loss", loss},
                  {"perplexity", std::exp(loss)},
                  {"lr", lr},
                  {"grad_norm", gnorm},
                  {"tokens_per_sec", double(log_rows) / span},
                  {"unpadded_tokens_per_sec", double(log_real) / span},
                  {"step_time", span / double(log_steps)},
                  {"epoch", batcher.epoch()},
                  {"elapsed", seconds_since(t_start)}};
      const double eta = double(cfg.num_train_steps - done) * step_time_avg;
      std::printf("step %6lld/%lld | loss %.4f | ppl %7.3f | lr %.3e | grad_norm %.3f | tok/s %.0f | unpadded tok/s %.0f | ETA %s\n",
                  (long long)done, (long long)cfg.num_train_steps, loss, std::exp(loss), lr, gnorm,
                  double(log_rows) / span, double(log_real) / span, format_eta(eta).c_str());
      if (val_batcher && cfg.dataset.val_every_n_steps > 0 && done % cfg.dataset.val_every_n_steps == 0) {
        json v = evaluate_mlm(model, *val_batcher, cfg.dataset.val_max_batches);
        std::printf("  validation | loss %.4f | ppl %.3f | accuracy %.4f\n", v["val_loss"].get<double>(),
                    v["val_perplexity"].get<double>(), v["val_accuracy"].get<double>());
        rec.update(v);
      }
      metrics << rec.dump() << "\n";
      metrics.flush();
      std::fflush(stdout);
      t_log = Clock::now();
      log_rows = log_real = log_steps = 0;
    }
    if (cfg.checkpoint.save_every_n_steps > 0 && done % cfg.checkpoint.save_every_n_steps == 0) {
      CheckpointContents c;
      c.step = done;
      c.data_cursor = batcher.cursor();
      c.config_yaml = to_yaml(cfg);
      c.state_json = json{{"seed", cfg.seed}, {"loss", loss}, {"epoch", batcher.epoch()}}.dump();
      c.files["model"] = model.params().export_tensors(DType::F32);
      c.files["optimizer"] = opt.state();
      summary.last_checkpoint = save_checkpoint(ckpt_dir, c, int(cfg.checkpoint.max_checkpoints));
      std::printf("  checkpoint saved: %s\n", summary.last_checkpoint.c_str());
    }
  }
  summary.end_step = step;
  summary.wall_seconds = seconds_since(t_start);

  if (cfg.checkpoint.save_final_model) {
    const std::string final_dir = out_dir + "/final_model";
    const std::string tmp = out_dir + "/.final_model.tmp";
    fs::remove_all(tmp);
    model.save_hf_dir(tmp);
    write_esm2_tokenizer_files(tmp, model.config().max_position_embeddings);
    fsync_dir(tmp);
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
    summary.final_model_dir = final_dir;
  }
  MlmStats st = batcher.stats();
  std::printf("data: %llu sequences seen (%llu truncated to %lld tokens, %llu unknown residues), epoch %llu\n",
              (unsigned long long)st.sequences, (unsigned long long)st.truncated,
              (long long)mopt.max_seq_length, (unsigned long long)st.unknown_tokens,
              (unsigned long long)batcher.epoch());
  std::printf("done: %lld steps in %.1f s | loss %.4f -> %.4f\n", (long long)(summary.end_step - summary.start_step),
              summary.wall_seconds, summary.first_loss, summary.last_loss);
  if (!summary.last_checkpoint.empty()) std::printf("checkpoints: %s\n", ckpt_dir.c_str());
  if (!summary.final_model_dir.empty())
    std::printf("final model (Hugging Face format): %s\n", summary.final_model_dir.c_str());
  return summary;
}

}  // namespace biofm
