#include "biofm/train/trainer.h"

#include <omp.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>

#include "biofm/core/device_memory.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/notes.h"
#include "biofm/data/context_parallel.h"
#include "biofm/data/rank_slice.h"
#include "biofm/dist/comm.h"
#include "biofm/dist/coordinator.h"
#include "biofm/dist/launch_env.h"
#include "biofm/train/data_parallel.h"
#include "biofm/train/fsdp.h"
#include "biofm/io/atomic_file.h"
#include "biofm/models/uppercase_labels.h"
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

// The resume line's mention of GEMM algorithm choices taken from the checkpoint (ops.gemm_autotune).
std::string tuned_gemms_text(int64_t choices) {
  return choices >= 0 ? ", " + std::to_string(choices) + " tuned GEMM algorithms" : "";
}

// Masked- or causal-LM loss (and accuracy) over the whole held-out set.
// Multi-process: each rank evaluates its share (rank_slice.h) and the sums are added over ranks.
// fsdp: every forward pass is collective, so ranks go in rounds of one batch each, a rank without
// a batch taking part in the round's gathers only.
// Context parallelism: the ranks of a group evaluate the same batches (each its rows of them);
// data_rank / data_world number the data-parallel groups.
json evaluate_held_out(LanguageModel& model, BatchSource& data, int64_t max_batches, Coordinator* ranks,
                       FsdpSync* fsdp, int data_rank, int data_world) {
  data.reset_eval();
  // (max_batches counts the held-out set's batches, over all groups: this group's share of them)
  if (ranks && max_batches > 0) max_batches = (max_batches - data_rank + data_world - 1) / data_world;
  Batch b;
  LossSums total;
  int64_t n = 0;
  while (true) {
    const bool have = (max_batches <= 0 || n < max_batches) && data.next_eval(b);
    if (!(fsdp ? ranks->any(have) : have)) break;
    if (!have) {
      fsdp->skip_forward();
      continue;
    }
    LossSums s = model.evaluate(b.to(model.device()), true);
    total.loss_sum += s.loss_sum;
    total.num_tokens += s.num_tokens;
    total.num_correct += s.num_correct;
    ++n;
  }
  if (max_batches > 0) data.reset_eval();
  if (ranks) {
    const std::vector<double> sums = ranks->sum({total.loss_sum, double(total.num_tokens), double(total.num_correct)});
    total = {sums[0], int64_t(sums[1]), int64_t(sums[2])};
  }
  const double loss = total.num_tokens ? total.loss_sum / double(total.num_tokens) : NAN;
  return {{"val_loss", loss},
          {"val_perplexity", perplexity_of(loss)},
          {"val_accuracy", total.num_tokens ? double(total.num_correct) / double(total.num_tokens) : NAN},
          {"val_tokens", total.num_tokens}};
}

// SIGTERM/SIGINT/SIGUSR1: the first asks the loop to stop after the current step (with a checkpoint);
// another one 2 s or more later exits at once. One stop often arrives twice within moments (Ctrl-C
// or Slurm signal the whole process group, and `biofm launch` passes it on too): such a repeat
// is the same request. Checkpoints are renamed into place only when whole, so an immediate exit
// leaves only complete ones (and a .tmp_step_* directory removed next start).
std::atomic<int> g_stop_signal{0};
std::atomic<int64_t> g_stop_signal_ns{0};
std::atomic<bool> g_stop_announce{true};  // rank 0 says it (every rank gets the signal from a launcher)

extern "C" void on_stop_signal(int sig) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // (async-signal-safe)
  const int64_t ns = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
  if (g_stop_signal.load() != 0) {
    if (ns - g_stop_signal_ns.load() < int64_t(2) * 1000000000) return;  // the same stop, delivered twice
    _exit(128 + sig);
  }
  g_stop_signal_ns = ns;
  g_stop_signal = sig;
  static const char msg[] =
      "\nbiofm train: stopping after this step (a checkpoint is written; signal again, 2 s or more later, to exit now)\n";
  if (g_stop_announce.load()) {
    ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
    (void)ignored;
  }
}

// Installs the handlers for the lifetime of a run; restores the previous ones after.
class StopSignals {
 public:
  explicit StopSignals(bool announce) {
    g_stop_signal = 0;
    g_stop_announce = announce;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGUSR1, &sa, &old_usr1_);  // Slurm's preemption warning (--signal=USR1@T)
  }
  ~StopSignals() {
    // After a stop the run is ending (checkpoint written, summary next): the same stop arriving
    // again moments later must not kill it with the default action, so the handlers stay.
    if (g_stop_signal.load() != 0) return;
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
  }
  int received() const { return g_stop_signal.load(); }

 private:
  struct sigaction old_term_ {}, old_int_ {}, old_usr1_ {};
};

// After a resume at `step`, keeps only the records of steps <= step: the steps after it are
// redone and logged again. A last line cut short by a kill goes too (split_jsonl), and any
// other line that is not JSON (nothing to keep).
void truncate_metrics(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return;
  const std::string raw = read_file(path);
  const JsonlText text = split_jsonl(raw);
  std::string kept;
  size_t dropped = 0;
  for (const std::string& line : text.lines) {
    if (line.empty()) continue;
    json rec = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool later = rec.is_object() && rec.contains("step") && rec["step"].is_number_integer() &&
                       rec["step"].get<int64_t>() > step;
    if (later || rec.is_discarded()) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  // (also rewritten when its last record lacks the newline: the next append would join them)
  if (dropped == 0 && !text.cut_tail && (raw.empty() || raw.back() == '\n')) return;
  write_file_atomic(path, kept);
  if (dropped > 0 || text.cut_tail)
    std::printf("metrics: dropped %zu record(s) after step %lld%s from %s (those steps are redone)\n", dropped,
              (long long)step, text.cut_tail ? " and a last line cut short by a kill" : "", path.c_str());
}

// Where a non-finite value sits, for the divergence messages: the first parameter (in the
// model's table order) whose weights hold one, else the first whose gradient does; "" when
// none is found. Copies the buffers to the host: only for a step that went bad. Gradients are
// read from the store's gradient buffer (under zero2/fsdp: this rank's reduced shard of it).
std::string first_nonfinite_tensor(const ParamStore& ps) {
  auto first_nonfinite = [](const Tensor& t) -> int64_t {  // index, or -1
    const Tensor h = t.to(Device::CPU).to(DType::F32);
    const float* p = h.f32();
    for (int64_t i = 0; i < h.numel(); ++i)
      if (!std::isfinite(p[i])) return i;
    return -1;
  };
  try {
    for (size_t i = 0; i < ps.size(); ++i)
      if (first_nonfinite(ps.param(i)) >= 0)
        return "the first parameter (in model order) with non-finite values is " + ps.spec(i).name;
  } catch (const Error&) {
    // (a store that holds only a shard of the parameters: nothing to name)
  }
  if (!ps.grad_flat().defined()) return "";
  const int64_t bad = first_nonfinite(ps.grad_flat());
  if (bad < 0) return "";
  const int64_t at = ps.grad_held().first + bad;  // element of the layout (offsets ascend in table order)
  for (size_t i = ps.size(); i-- > 0;)
    if (ps.offset(i) <= at)
      return "the first parameter (in model order" + std::string(ps.gradients_sharded() ? ", of this rank's shard" : "") +
             ") with a non-finite gradient is " + ps.spec(i).name;
  return "";
}

void export_final_model(const LanguageModel& model, const TrainConfig& cfg, const std::string& out_dir,
                        const std::string& final_dir) {
  const std::string tmp = out_dir + "/.final_model.tmp";
  fs::remove_all(tmp);
  model.save_hf_dir(tmp);
  if (const auto& carried = model.carried_tensors(); !carried.empty())
    note(final_dir + ": " + std::to_string(carried.size()) + " tensors of model.init_from that biofm does not train (" +
         carried.front().name + (carried.size() > 1 ? ", ..." : "") + ") are written into the export unchanged");
  // (how its targets were cased, for eval and score: models/uppercase_labels.h)
  if (family_named(cfg.model.family).objective == Objective::CausalLM)
    record_uppercase_labels(tmp, cfg.dataset.uppercase_labels);
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
  ac.offload = cfg.optimizer.offload;
  return ac;
}

bool apply_adamw_ahead(const TrainConfig& cfg, AdamW& opt, LanguageModel& model, bool one_process) {
  if (!cfg.ops.adamw_ahead || !one_process || opt.sharded() || opt.offloaded()) return false;
  opt.apply_ahead_in(model);
  return true;
}

std::string nonfinite_text(double loss, double grad_norm) {
  char buf[96];
  if (std::isfinite(loss))
    std::snprintf(buf, sizeof buf, "non-finite grad norm %g (loss %g)", grad_norm, loss);
  else if (std::isfinite(grad_norm))
    std::snprintf(buf, sizeof buf, "non-finite loss %g (grad norm %g)", loss, grad_norm);
  else
    std::snprintf(buf, sizeof buf, "non-finite loss %g and grad norm %g", loss, grad_norm);
  return buf;
}

namespace {

// One training run, phase by phase: set up (data, model, optimizer, resume, sinks), the step
// loop (train step, health check and logging, validation, checkpoints, stop signals), finish
// (final export, summary).
class TrainingRun {
 public:
  TrainingRun(const TrainConfig& cfg, const std::string& config_header)
      : cfg_(cfg), device_(device_of(cfg)), config_header_(config_header) {}

  TrainSummary run() {
    setup();
    loop();
    fail_if_ended_diverged();
    finish();
    return summary_;
  }

 private:
  // Everything that can fail on bad input fails here, before any output is written.
  void setup() {
    env_ = detect_dist_env();
    root_ = env_.rank == 0;
    // One GPU per local rank, chosen before any CUDA work.
    if (env_.distributed() && device_ == Device::CUDA && cuda_available()) select_cuda_device(env_.local_rank);
    apply_op_options(cfg_);
    // FP8 statistics: fp8_config.stats_interval, or the recipes' quant_stats_config switch (may
    // read its quant_stats_file: fails here on a malformed one).
    stats_every_ = fp8_stats_interval(cfg_, &stats_note_);
    if (device_ == Device::CUDA && !cuda_available())
      fail("device=cuda but this biofm has no CUDA backend or no GPU is visible; use device=cpu");
    if (cfg_.num_threads > 0) {
      omp_set_num_threads(cfg_.num_threads);
      openblas_set_num_threads(cfg_.num_threads);
    }
    const int cp = cfg_.cp_size;  // (the GPU's refusal is the config check's)
    if (env_.world_size % cp != 0)
      fail("cp_size=", cp, " splits sequences over groups of ", cp, " ranks, but this run has ",
           env_.world_size, " rank(s): start a multiple of ", cp, " (biofm launch --nproc-per-node ", cp, " ...)");
    train_set_ = load_corpus(cfg_, /*val=*/false, /*notes=*/root_);
    if (!cfg_.dataset.val_path.empty()) val_set_ = load_corpus(cfg_, /*val=*/true, /*notes=*/root_);
    if (env_.distributed()) connect_ranks();
    // Data parallelism hands batches to groups of cp ranks; the ranks of a group share each one.
    dp_rank_ = env_.rank / cp;
    dp_world_ = env_.world_size / cp;
    data_ = slice_for_rank(make_batch_source(cfg_, *train_set_), dp_rank_, dp_world_, cfg_.grad_acc_steps);
    if (val_set_) val_data_ = slice_for_rank(make_batch_source(cfg_, *val_set_), dp_rank_, dp_world_, 1);
    build_model();
    if (cp > 1) split_sequences_over_group(cp);
    out_dir_ = cfg_.output_dir;
    ckpt_dir_ = cfg_.resolved_ckpt_dir();
    if (root_) {
      make_dirs_writable(out_dir_);
      make_dirs_writable(ckpt_dir_);
      probe_checkpoint_dir(ckpt_dir_);
    }
    if (comm_ && !model_->params().sharded()) {
      // Every rank starts from rank 0's parameters (initialisation is seeded, but one copy
      // makes the replicas identical by construction; a resumed checkpoint then overwrites them
      // alike). Before the optimizer, which may move the masters to the host.
      comm_->broadcast(model_->params().flat(), 0);
      comm_->join();
      if (model_->params().compute_flat().defined()) model_->params().refresh_compute_copy();
    }
    const bool sharded = comm_ && optimizer_sharded(cfg_.distributed.strategy);
    opt_ = std::make_unique<AdamW>(model_->params(), adamw_config(cfg_), sharded ? comm_.get() : nullptr);
    apply_adamw_ahead(cfg_, *opt_, *model_, /*one_process=*/!comm_);
    if (comm_) {
      DataParallelOptions o;
      o.strategy = cfg_.distributed.strategy;
      o.bucket_bytes = int64_t(cfg_.distributed.bucket_mb) << 20;
      o.bf16_reduce = cfg_.distributed.bf16_reduce;
      o.nccl_symmetric = cfg_.distributed.nccl_symmetric;
      if (!sharded_gradients()) sync_ = std::make_unique<GradientSync>(*comm_, *model_, o);
    }
    summary_.ckpt_dir = ckpt_dir_;
    if (root_) print_banner();  // (before resume's lines: what runs, then where it starts)
    resume();
    if (comm_ && sharded_gradients()) {
      // (after resume and the first broadcast, which need the whole store on every rank)
      auto sync = std::make_unique<FsdpSync>(*comm_, *model_, cfg_.distributed.strategy, cfg_.distributed.bf16_reduce);
      if (cfg_.distributed.strategy == ParallelStrategy::Fsdp) fsdp_ = sync.get();
      sync_ = std::move(sync);
    }
    // Tokenizing, masking and packing run ahead on a background thread from here on.
    prefetch_ = std::make_unique<Prefetcher>(*data_, 4);
    open_metrics();
    if (root_) {
      write_file_atomic(out_dir_ + "/config.yaml", to_yaml(cfg_, config_header_));
      if (step_ == 0)
        if (const std::string n = warmup_note(schedule()); !n.empty()) std::printf("note: %s\n", n.c_str());
    }
  }

  // profiler.range_times: the window's per-range times, this rank's in its own file, rank 0's
  // printed.
  void write_range_times(const ProfilerWindow::Timed& t) {
    const std::vector<range_timer::Row>& rows = t.rows;
    const int64_t first = t.first, last = t.last;
    make_dirs_writable(out_dir_);  // (rank 0 made it; on another node's disk it may not exist)
    const std::string path = out_dir_ + "/range_times_rank" + std::to_string(env_.rank) + ".json";
    write_file_atomic(path, range_timer::to_json(rows, first, last, env_.rank, device_ == Device::CUDA));
    if (!root_) return;
    std::printf("%s", range_timer::format_table(rows, last - first + 1,
                                                "range times of steps " + std::to_string(first) + "-" +
                                                    std::to_string(last) + " (rank 0; " +
                                                    (device_ == Device::CUDA ? "stream time, CUDA events" : "wall clock") +
                                                    "), per step; all ranks: " + out_dir_ + "/range_times_rank*.json")
                          .c_str());
    std::fflush(stdout);
  }

  // The control plane (rendezvous, liveness) and the collectives of a multi-process run.
  void connect_ranks() {
    CoordinatorOptions co;
    co.step_timeout = std::chrono::seconds(cfg_.distributed.step_timeout_s);
    co.io_timeout = std::chrono::seconds(cfg_.distributed.io_timeout_s);
    co.first_step_timeout = std::max(co.first_step_timeout, co.step_timeout);
    co.heartbeat_timeout = std::chrono::seconds(cfg_.distributed.heartbeat_timeout_s);
    co.connect_timeout = std::chrono::seconds(cfg_.distributed.rendezvous_timeout_s);
    co.command = "train";
    coord_ = std::make_unique<Coordinator>(env_, co);
    // The setup from here to step 1 (NCCL, the model, resume) is watched too, under io_timeout:
    // a rank stuck in it is named instead of the others waiting in a collective for ever.
    coord_->set_step(0, Coordinator::Phase::Io);
    check_same_config_on_every_rank();
    comm_ = make_communicator(*coord_, device_, env_, cfg_.distributed.comm_sms);
    const int cp = cfg_.cp_size;
    // this rank's context-parallel group: ranks g·cp .. g·cp + cp - 1
    if (cp > 1) cp_comm_ = make_group_communicator(*coord_, device_, env_, env_.rank / cp * cp, cp);
    const std::string cp_text = cp > 1 ? ", context parallel in groups of " + std::to_string(cp) + " ranks (" +
                                             std::to_string(env_.world_size / cp) + " data-parallel)"
                                       : "";
    if (root_)
      std::printf("distributed: %d ranks (%s), %s, strategy %s%s%s%s\n", env_.world_size, env_.source.c_str(),
                  comm_->name().c_str(), strategy_name(cfg_.distributed.strategy), cp_text.c_str(),
                  cfg_.distributed.bf16_reduce ? ", bf16 gradient reduction" : "",
                  cfg_.distributed.nccl_symmetric && !sharded_gradients()
                      ? ", symmetric-memory reduction (if the backend has it)" : "");
  }

  // A run resumed on another number of data-parallel ranks (or with another grad_acc_steps)
  // takes another number of batches per optimizer step: said, with the grad_acc_steps that keeps
  // the checkpoint's.
  void note_global_batch_change(const TrainerState& st) const {
    int64_t ranks = 0, acc = 0;
    try {
      const json state = json::parse(st.state_json);
      ranks = state.value("data_parallel_ranks", int64_t(0));
      acc = state.value("grad_acc_steps", int64_t(0));
    } catch (const std::exception&) {  // (checked when the checkpoint loaded; nothing to compare)
      return;
    }
    const int64_t then = ranks * acc, now = int64_t(dp_world_) * cfg_.grad_acc_steps;
    if (ranks <= 0 || acc <= 0 || then == now) return;  // (a checkpoint of an older biofm: nothing to compare)
    std::string keep;
    if (then % dp_world_ == 0) keep = " (grad_acc_steps=" + std::to_string(then / dp_world_) + " keeps it)";
    std::printf("note: the checkpoint's run took %lld batches per optimizer step (%lld data-parallel rank(s) x "
                "grad_acc_steps=%lld); this run takes %lld (%d x %lld): the global batch changes%s\n",
                (long long)then, (long long)ranks, (long long)acc, (long long)now, dp_world_,
                (long long)cfg_.grad_acc_steps, keep.c_str());
  }

  // Ranks started by hand (torchrun-style variables, srun) may be given different configs: the
  // model's shapes then disagree inside a collective, and other settings (lr, steps) silently
  // make the replicas diverge. Every key must be rank 0's, except those a rank may hold its own
  // way: paths (other mounts), threads, logging and profiling.
  void check_same_config_on_every_rank() {
    static const char* kLocal[] = {"num_threads", "output_dir", "dataset.path", "dataset.val_path", "model.init_from",
                                   "checkpoint.ckpt_dir", "logger.", "profiler."};
    std::string mine;
    for (const std::string& line : config_lines(cfg_)) {
      const bool local = std::any_of(std::begin(kLocal), std::end(kLocal), [&](const char* k) {
        const std::string key(k);
        return key.back() == '.' ? line.rfind(key, 0) == 0 : line.rfind(key + "=", 0) == 0;
      });
      if (!local) mine += line + "\n";
    }
    const std::vector<std::string> all = coord_->all_gather(mine);
    std::string differ;
    for (size_t r = 1; r < all.size(); ++r) {
      if (all[r] == all[0]) continue;
      std::istringstream a(all[0]), b(all[r]);
      for (std::string x, y; std::getline(a, x) && std::getline(b, y);)
        if (x != y) differ += "\n  rank " + std::to_string(r) + ": " + y + " (rank 0: " + x.substr(x.find('=') + 1) + ")";
    }
    if (!differ.empty())
      fail("the ranks were given different configs (every rank must train the same one):", differ);
  }

  // Context parallelism: this rank's group (ranks dp_rank·cp .. dp_rank·cp + cp - 1) and its
  // share of every batch's sequences (data/context_parallel.h).
  void split_sequences_over_group(int cp) {
    model_->set_context_parallel_group(cp_comm_.get());
    const int32_t pad = family_named(cfg_.model.family).tokenizer().pad_id(), mask = model_->token_dropout_mask_id();
    const int cp_rank = env_.rank % cp;
    data_ = slice_for_context_parallel(std::move(data_), cp_rank, cp, pad, mask);
    if (val_data_) val_data_ = slice_for_context_parallel(std::move(val_data_), cp_rank, cp, pad, mask);
  }

  void build_model() {
    try {
      // (fsdp: each rank builds, initialises or loads only its shard of the parameters; zero2:
      // only its shard of the gradients)
      ParamShard shard;
      if (env_.distributed() && sharded_gradients())
        shard = {env_.rank, env_.world_size, cfg_.distributed.strategy == ParallelStrategy::Zero2};
      model_ = make_model(cfg_, device_, shard);
    } catch (const std::bad_alloc&) {
      fail("not enough memory for the model of model.config (hidden_size ", cfg_.model.config.hidden_size,
           ", num_hidden_layers ", cfg_.model.config.num_hidden_layers, ", intermediate_size ",
           cfg_.model.config.intermediate_size, "); reduce its sizes");
    }
    // Sequences longer than the model's positions would only make batches (and time and
    // memory) grow without bound; say so before any work.
    if (cfg_.dataset.max_seq_length > model_->dims().max_positions)
      fail("dataset.max_seq_length (", cfg_.dataset.max_seq_length, ") exceeds the model's max_position_embeddings (",
           model_->dims().max_positions,
           "); lower dataset.max_seq_length or raise model.config.max_position_embeddings");
  }

  // The newest usable checkpoint, if any; every fallback said in one line.
  void resume() {
    if (root_) remove_stale_tmp_dirs(ckpt_dir_);
    if (!cfg_.checkpoint.resume_from_checkpoint) {
      // A fresh start among another run's checkpoints would overwrite some of them and leave the
      // newer ones, which a later resume would take for this run's.
      const auto old = list_checkpoints(ckpt_dir_);
      if (!old.empty())
        fail("checkpoint.resume_from_checkpoint=false, but ", ckpt_dir_, " holds ", old.size(),
             " checkpoint(s) of an earlier run (the newest ", old.back().second,
             "): starting over there would mix the two runs; use another output_dir (or checkpoint.ckpt_dir), or "
             "remove them");
    }
    if (cfg_.checkpoint.resume_from_checkpoint) {
      const auto candidates = list_checkpoints(ckpt_dir_, /*incomplete=*/true);
      const std::string config_yaml = to_yaml(cfg_);
      if (auto st = resume_training_checkpoint(ckpt_dir_, *model_, *opt_, &resumed_from_, config_yaml)) {
        step_ = st->step;
        if (step_ > cfg_.num_train_steps)  // (before "resumed from": it is not resumed)
          fail("the checkpoint ", resumed_from_, " is at step ", step_, ", past num_train_steps=", cfg_.num_train_steps,
               "; raise num_train_steps, or use another output_dir (or checkpoint.ckpt_dir) to start over");
        data_->set_cursor(st->data_cursor);
        const bool older = resumed_from_ != candidates.back().second;
        if (root_) {
          std::printf("resumed from %s (step %lld, data cursor %llu%s)%s\n", resumed_from_.c_str(), (long long)step_,
                      (unsigned long long)st->data_cursor, tuned_gemms_text(st->gemm_choices).c_str(),
                      older ? "; newer checkpoints failed to load (warnings above), an older one is used" : "");
          for (const std::string& d : resume_differences(st->config_yaml, config_yaml)) std::printf("note: %s\n", d.c_str());
          for (const std::string& n : st->notes) std::printf("note: %s\n", n.c_str());
          note_global_batch_change(*st);
        }
      } else if (!candidates.empty() && root_) {
        std::printf("no usable checkpoint in %s (%zu failed to load, warnings above): starting from step 0\n",
                    ckpt_dir_.c_str(), candidates.size());
      }
    }
    if (step_ > 0 && !cfg_.metrics_path().empty() && root_) truncate_metrics(cfg_.metrics_path(), step_);
    if (step_ > 0 && step_ == cfg_.num_train_steps && root_)
      std::printf("nothing to train: %s is at step %lld = num_train_steps\n", resumed_from_.c_str(), (long long)step_);
  }

  void open_metrics() {
    ProfilerWindow::configure(cfg_.profiler.start_step, cfg_.profiler.end_step, step_);
    range_timer::set_enabled(cfg_.profiler.range_times, device_ == Device::CUDA);
    if (root_ && cfg_.profiler.start_step >= 0 &&
        (cfg_.profiler.start_step <= step_ || cfg_.profiler.start_step > cfg_.num_train_steps))
      std::printf("note: the profiler window (steps %lld-%lld) lies outside the steps this run trains (%lld-%lld): "
                  "nothing is captured or timed\n",
                  (long long)cfg_.profiler.start_step, (long long)cfg_.profiler.end_step, (long long)step_ + 1,
                  (long long)cfg_.num_train_steps);
    if (root_ && !stats_note_.empty())
      std::printf("%s%s\n", stats_note_.c_str(),
                  model_->layer_quant().empty() ? " (no FP8/FP4 layers in this run: none are collected)" : "");
    const std::string qpath = cfg_.quant_stats_path(env_.rank);
    if (stats_every_ > 0 && !model_->layer_quant().empty() && !qpath.empty()) {
      // Each rank its own file, as the recipes' quant_log_dir/rank_<r>/.
      make_dirs_writable(fs::path(qpath).parent_path().string());
      if (step_ > 0) truncate_metrics(qpath, step_);
      quant_log_ = std::make_unique<JsonlSink>(qpath, /*append=*/step_ > 0);
    }
    if (!root_) return;  // one set of logs for the run
    metrics_.add(std::make_unique<ProgressLineSink>());
    if (!cfg_.metrics_path().empty())
      metrics_.add(std::make_unique<JsonlSink>(cfg_.metrics_path(), /*append=*/step_ > 0));
    if (cfg_.logger.tensorboard) metrics_.add(std::make_unique<TensorBoardSink>(out_dir_ + "/tensorboard"));
  }

  void print_banner() const {
    const ModelDims dims = model_->dims();
    std::printf("biofm train: %s, %lld layers, hidden %lld, %s parameters on %s (%s) | data %s: %s\n",
                model_->family().c_str(), (long long)dims.layers, (long long)dims.hidden,
                parameter_count_text(dims.parameters).c_str(), device_name(device_), describe_precision(cfg_, device_).c_str(),
                cfg_.dataset.path.c_str(), train_set_->summary().c_str());
    if (!model_->layer_quant().empty()) {  // which layer runs in which precision
      bool emulated = device_ == Device::CPU;
      for (const ops::LayerQuant& q : model_->layer_quant())
        emulated = emulated || q.format == ops::LayerFormat::Fp4 ||
                   (q.format == ops::LayerFormat::Fp8 && q.scaling == ops::Fp8Scaling::Mxfp8);
      std::printf("precision by layer: %s%s\n",
                  ops::describe_layer_quant(model_->layer_quant(), device_ == Device::CPU ? "fp32" : "bf16").c_str(),
                  device_ == Device::CPU ? " (quantization emulated on the CPU)"
                  : emulated ? " (MXFP8 / NVFP4 layers emulated: quantize-dequantize around bf16 GEMMs, no speedup)"
                             : "");
    }
    if (opt_->offloaded())
      std::printf("optimizer state offloaded to host memory: %lld bytes on rank 0 (%.2f GiB: %s), updated by the "
                  "CPU%s\n",
                  (long long)opt_->offloaded_bytes(), double(opt_->offloaded_bytes()) / double(1 << 30),
                  model_->params().has_compute_copy() ? "fp32 master weights and AdamW moments" : "AdamW moments",
                  device_ == Device::CPU ? " (device=cpu: the state was in host memory already)" : "");
    std::fflush(stdout);
  }

  ScheduleSpec schedule() const {
    return {cfg_.scheduler.type, cfg_.scheduler.warmup_steps, cfg_.num_train_steps, cfg_.scheduler.decay_fraction,
            cfg_.scheduler.min_lr_ratio};
  }

  uint64_t epoch_now() const { return prefetch_->cursor() / data_->samples_per_epoch(); }

  void loop() {
    summary_.start_step = step_;
    t_start_ = Clock::now();
    // (gpu_mem_peak_gib is the training peak: setup's transient buffers — fsdp builds the model
    // whole before sharding it — are not what a step needs)
    device_memory_reset_peak();
    TrainStep train_step(*model_, *opt_, sync_.get());
    ThroughputWindow window(model_->dims(), /*watch_gpu=*/device_ == Device::CUDA, cfg_.log_mfu);
    const ScheduleSpec sched = schedule();
    StopSignals signals(/*announce=*/root_);
    for (; step_ < cfg_.num_train_steps; ++step_) {
      if (coord_) coord_->set_step(step_ + 1);
      std::vector<Batch> micro;
      for (int64_t a = 0; a < cfg_.grad_acc_steps; ++a) {
        micro.push_back(prefetch_->next());
        window.add_batch(micro.back());
      }
      const double lr = cfg_.optimizer.lr * lr_multiplier(sched, step_);
      const int64_t done = step_ + 1;
      ops::QuantStatsCollector quant_stats;  // FP8 statistics on their steps (host copies: slow)
      const bool stats_now = stats_every_ > 0 && done % stats_every_ == 0 && !model_->layer_quant().empty();
      if (stats_now) model_->set_quant_stats(&quant_stats);
      train_step.run(micro, lr);
      model_->set_quant_stats(nullptr);
      window.add_step();
      if (auto timed = ProfilerWindow::take_timed()) write_range_times(*timed);

      json rec = check_and_log(done, lr, train_step, window);
      if (stats_now) {
        if (quant_log_) {  // this rank's statistics (quant_stats_config.quant_log_dir)
          json q = {{"step", done}, {"rank", env_.rank}};
          add_quant_stats(q, quant_stats);
          quant_log_->write(with_standard_keys(q));
        }
        if (rec.is_null()) rec = {{"step", done}, {"elapsed", seconds_since(t_start_)}};
        add_quant_stats(rec, quant_stats);
      }
      if (coord_) coord_->set_step(done, Coordinator::Phase::Io);  // (validation, checkpoint: io_timeout)
      if (val_data_ && cfg_.dataset.val_every_n_steps > 0 && done % cfg_.dataset.val_every_n_steps == 0) {
        // (on its own schedule, whatever logger.frequency is)
        if (rec.is_null()) rec = {{"step", done}, {"elapsed", seconds_since(t_start_)}};
        rec.update(evaluate_held_out(*model_, *val_data_, cfg_.dataset.val_max_batches, coord_.get(), fsdp_, dp_rank_,
                                     dp_world_));
      }
      if (!rec.is_null()) metrics_.write(rec);
      // Every rank stops after the same step: a signal to any (Slurm signals them all, but not
      // at the same instant) stops all. (A host round trip to rank 0 per step, no GPU sync.)
      const bool stop_now = coord_ ? coord_->any(signals.received() != 0) : signals.received() != 0;
      // (a stop decides on this step's own loss, not on the last logged one: on the GPU the
      // check runs every logger.frequency steps, or on a save step)
      if (stop_now && checked_step_ != done) check_step(done, train_step);
      if (checkpoint_due(done) || stop_now) checkpoint(done);
      if (stop_now) {
        if (root_)
          std::printf("stopped by %s after step %lld; resume with the same command\n",
                      signals.received() ? ("signal " + std::to_string(signals.received())).c_str()
                                         : "a signal to another rank",
                      (long long)done);
        stopped_ = true;
        ++step_;
        break;
      }
    }
  }

  // Every save_every_n_steps steps, and at the last step (as the HF Trainer saves at the end):
  // the same command started again then finds the run finished instead of training it anew.
  bool checkpoint_due(int64_t done) const {
    const int64_t every = cfg_.checkpoint.save_every_n_steps;
    return every > 0 && (done % every == 0 || done == cfg_.num_train_steps);
  }

  // Reads loss and grad norm when the step logs or saves a checkpoint (and, on the CPU where
  // reads are free, every step): counts non-finite steps, fails after 10 in a row; returns the
  // step's record when it logs (null otherwise).
  json check_and_log(int64_t done, double lr, TrainStep& train_step, ThroughputWindow& window) {
    const bool log_now = done % cfg_.logger.frequency == 0 || done == cfg_.num_train_steps;
    const int64_t check_every = device_ == Device::CPU ? 1 : cfg_.logger.frequency;
    if (!log_now && !checkpoint_due(done) && done % check_every != 0) return json();
    const auto [loss, gnorm] = check_step(done, train_step);
    if (!log_now) return json();
    return log_record(done, lr, loss, gnorm, window);
  }

  // Reads the step's loss and grad norm (reduced over ranks: every rank sees the same) and counts
  // a non-finite streak; fails after 10 non-finite checks in a row.
  // A step without label tokens (windows of only N bases, say) has no loss: it is counted, logged
  // without one, and left out of the first/last loss (its gradients are zero; AdamW still steps).
  std::pair<double, double> check_step(int64_t done, TrainStep& train_step) {
    checked_step_ = done;
    ++summary_.checked_steps;
    const TrainStep::Loss read = train_step.read_loss();
    double loss = read.mean;
    const double gnorm = opt_->read_grad_norm();
    no_targets_ = read.label_count == 0 && std::isfinite(gnorm) && test_nonfinite_step_ != done;
    if (no_targets_) {
      ++summary_.no_target_steps;
      return {loss, gnorm};
    }
    if (test_nonfinite_step_ == done) loss = NAN;  // (BIOFM_TEST_NONFINITE_STEP: tests only)
    if (!std::isfinite(loss) || !std::isfinite(gnorm)) {
      // (names the step; the last checkpoint, if any, is the state before the divergence:
      // none is saved during a streak)
      ++summary_.skipped_nonfinite_steps;
      if (bad_checks_ == 0) {  // once a streak
        nonfinite_where_ = first_nonfinite_tensor(model_->params());
        streak_first_step_ = done;
      }
      std::fprintf(stderr, "warning: step %lld: %s%s%s; the update was skipped\n", (long long)done,
                   nonfinite_text(loss, gnorm).c_str(), nonfinite_where_.empty() ? "" : "; ", nonfinite_where_.c_str());
      if (++bad_checks_ >= 10)
        fail("training diverged: non-finite loss or gradients at 10 consecutive checks (step ", done,
             nonfinite_where_.empty() ? "" : "; at the first of them " + nonfinite_where_, "); ", divergence_advice());
    } else {
      bad_checks_ = 0;
      if (!have_first_) summary_.first_loss = loss, have_first_ = true;
      summary_.last_loss = loss;
    }
    return {loss, gnorm};
  }

  // The step's metrics record (the run's figures gathered over ranks).
  json log_record(int64_t done, double lr, double loss, double gnorm, ThroughputWindow& window) {
    json rec = window.report(done, cfg_.num_train_steps, loss, lr, gnorm, device_);
    if (no_targets_) {  // (no loss to log: not a perfect 0)
      rec.erase("loss");
      rec.erase("perplexity");
      rec["no_target_tokens"] = true;
    }
    if (coord_) {
      // Each rank's throughput, and the run's; the non-pad tokens per step summed over ranks, the
      // memory figures the largest (window peak) and the mean (allocated now) over ranks, as the
      // recipes' torchmetrics reduce them.
      const bool mem = rec.contains("gpu_mem_allocated_max_gib");
      const json mine = {rec["tokens_per_sec"], rec["unpadded_tokens_per_step"],
                         mem ? rec["gpu_mem_allocated_max_gib"] : json(0.0),
                         mem ? rec["gpu_mem_allocated_mean_gib"] : json(0.0)};
      json per_rank = json::array();
      double total = 0, unpadded = 0, mem_max = 0, mem_sum = 0;
      for (const std::string& v : coord_->all_gather(mine.dump())) {
        const json r = json::parse(v);
        per_rank.push_back(r[0]);
        total += r[0].get<double>();
        unpadded += r[1].get<double>();
        mem_max = std::max(mem_max, r[2].get<double>());
        mem_sum += r[3].get<double>();
      }
      rec["world_size"] = env_.world_size;
      rec["rank_tokens_per_sec"] = per_rank;
      rec["global_tokens_per_sec"] = total;
      rec["unpadded_tokens_per_step"] = unpadded;
      if (mem) {
        rec["gpu_mem_allocated_max_gib"] = mem_max;
        rec["gpu_mem_allocated_mean_gib"] = mem_sum / double(env_.world_size);
      }
    }
    rec["epoch"] = epoch_now();
    rec["data_skipped_records"] = train_set_->skipped_records();  // empty / malformed (dataset.on_error)
    rec["elapsed"] = seconds_since(t_start_);
    window.reset();
    return rec;
  }

  // A run whose last check was non-finite ends diverged (exit 1, no final model), unless that
  // check alone was: its update was skipped, so the model is the step before's, and if it gives
  // a finite loss on the next training batch the bad step was one bad batch (warning, exported).
  void fail_if_ended_diverged() {
    if (stopped_ || bad_checks_ == 0) return;
    if (bad_checks_ == 1) {
      const double next = next_batch_loss();
      if (std::isfinite(next)) {
        if (root_)
          std::fprintf(stderr,
                       "warning: the last step's loss or gradients were non-finite (step %lld; its update was "
                       "skipped); the final weights give a finite loss on the next batch (%.4f): one bad batch, so "
                       "the model is exported\n",
                       (long long)step_, next);
        return;
      }
    }
    const std::string steps = std::to_string(streak_first_step_) + "-" + std::to_string(step_);
    fail("training diverged: non-finite loss or gradients at ",
         device_ == Device::CPU ? "each of the last " + std::to_string(bad_checks_) + " step(s) (steps " + steps
                                : "the last " + std::to_string(bad_checks_) + " check(s) (steps " + steps +
                                      ", read every logger.frequency steps",
         nonfinite_where_.empty() ? "" : "; at the first of them " + nonfinite_where_,
         "), up to the end of the run", bad_checks_ == 1 ? ", and the final weights give a non-finite loss on the next batch too" : "",
         "; no final model was exported; ", divergence_advice());
  }

  // The model's mean loss on the next training batch (each rank its own, summed over ranks:
  // fsdp's forward is collective and every rank decides on the same number).
  double next_batch_loss() {
    const Batch b = prefetch_->next();
    const LossSums s = model_->evaluate(b.to(model_->device()), true);
    double sum = s.loss_sum, n = double(s.num_tokens);
    if (coord_) {
      const std::vector<double> r = coord_->sum({sum, n});
      sum = r[0], n = r[1];
    }
    return n > 0 ? sum / n : NAN;
  }

  // What to do after a divergence, and where the last good state is.
  std::string divergence_advice() const {
    return "lower optimizer.lr or check the data. " +
           (!summary_.last_checkpoint.empty() ? "The last checkpoint is " + summary_.last_checkpoint
            : !resumed_from_.empty()          ? "The last checkpoint is " + resumed_from_
                                              : std::string("No checkpoint was saved."));
  }

  // The complete masters where model files are written (rank 0): zero1/zero2 broadcast every
  // shard; fsdp gathers a host copy on rank 0 (dropped by release_full_params).
  void gather_full_params() {
    opt_->gather_params();
    if (fsdp_) fsdp_->gather_full_copy(0);
  }
  void release_full_params() {
    if (fsdp_) model_->params().clear_full_copy();
  }

  // "fp8/layer_03/qkv/input/amax" etc.: per quantized tensor (metrics.jsonl and TensorBoard).
  static void add_quant_stats(json& rec, const ops::QuantStatsCollector& c) {
    for (const auto& [name, s] : c.tensors) {
      const std::string k = "fp8/" + name + "/";
      rec[k + "amax"] = s.amax;
      if (s.scale > 0) rec[k + "scale"] = s.scale;
      rec[k + "underflow"] = s.elements ? double(s.underflows) / double(s.elements) : 0.0;
      rec[k + "overflow"] = s.elements ? double(s.overflows) / double(s.elements) : 0.0;
    }
  }

  void checkpoint(int64_t done) {
    // A state whose last check was non-finite is not saved: as the newest checkpoint it would be
    // where a resume starts, and the run cannot go on from it. (Every rank read the same
    // reduced loss and norm, so all skip together.)
    if (bad_checks_ > 0) {
      if (root_)
        std::fprintf(stderr, "warning: step %lld: no checkpoint saved: the loss or gradients are non-finite%s\n",
                     (long long)done,
                     summary_.last_checkpoint.empty() ? "" : ("; the last checkpoint is " + summary_.last_checkpoint).c_str());
      return;
    }
    // (fsdp: each rank writes the part it holds; zero1/zero2: rank 0 writes the masters whole)
    opt_->gather_params();
    TrainerState st{done, prefetch_->cursor(),
                    json{{"seed", cfg_.seed},
                         {"epoch", epoch_now()},
                         {"data_parallel_ranks", dp_world_},
                         {"grad_acc_steps", cfg_.grad_acc_steps}}
                        .dump(),
                    to_yaml(cfg_)};
    try {
      summary_.last_checkpoint =
          save_training_checkpoint(ckpt_dir_, st, *model_, *opt_, cfg_.checkpoint.max_checkpoints, coord_.get());
    } catch (const std::exception& e) {
      // The writer removes its temporary directory; sweep any other leftovers too.
      if (root_) remove_stale_tmp_dirs(ckpt_dir_);
      fail("saving the checkpoint of step ", done, " in ", ckpt_dir_, " failed: ", e.what());
    }
    release_full_params();
    if (root_) std::printf("  checkpoint saved: %s\n", summary_.last_checkpoint.c_str());
  }

  void finish() {
    summary_.end_step = step_;
    summary_.wall_seconds = seconds_since(t_start_);
    // (a run that ended inside the profiler window: what it timed)
    if (auto timed = ProfilerWindow::take_timed(/*close=*/true)) write_range_times(*timed);
    prefetch_.reset();  // the source is ours again (its counters are read below)
    if (coord_) coord_->set_step(step_, Coordinator::Phase::Io);
    // A finished run started again trains nothing: its final model (if written) stands as it is.
    const bool nothing_trained = summary_.end_step == summary_.start_step;
    bool final_exists = root_ && std::filesystem::exists(out_dir_ + "/final_model/config.json");
    if (coord_ && nothing_trained)  // rank 0's view decides for all: the export below is collective
      final_exists = coord_->all_gather(final_exists ? "1" : "0")[0] == "1";
    if (cfg_.checkpoint.save_final_model && !stopped_ && !(nothing_trained && final_exists)) {
      gather_full_params();
      summary_.final_model_dir = out_dir_ + "/final_model";
      if (root_) export_final_model(*model_, cfg_, out_dir_, summary_.final_model_dir);
      release_full_params();
    }
    if (coord_) {
      sync_.reset();
      fsdp_ = nullptr;
      if (model_) model_->set_context_parallel_group(nullptr);
      cp_comm_.reset();
      comm_.reset();
      coord_->finish();  // every rank is done: closing connections are not failures
    }
    if (!root_) return;
    // (each rank reads and counts only its own batches' sequences; a run that trained nothing
    // only read ahead)
    if (!nothing_trained)
      std::printf("data%s: %s\n", env_.distributed() ? " (rank 0's batches)" : "", data_->summary().c_str());
    const long long steps = (long long)(summary_.end_step - summary_.start_step);
    if (nothing_trained && summary_.end_step >= cfg_.num_train_steps)
      std::printf("done: nothing to train: the run had already reached step %lld of num_train_steps=%lld%s\n",
                  (long long)summary_.end_step, (long long)cfg_.num_train_steps,
                  final_exists ? " (its final model is left as it was)" : "");
    else if (have_first_)
      std::printf("done: %lld steps in %.1f s | loss %.4f -> %.4f\n", steps, summary_.wall_seconds,
                  summary_.first_loss, summary_.last_loss);
    else
      std::printf("done: %lld steps in %.1f s (no finite loss was read)\n", steps, summary_.wall_seconds);
    if (summary_.no_target_steps == summary_.checked_steps && summary_.checked_steps > 0)
      std::fprintf(stderr,
                   "warning: no step of this run had a target token (all %lld steps read): the data holds nothing "
                   "the model is trained to predict (e.g. only N bases for a DNA model); check dataset.path\n",
                   (long long)summary_.checked_steps);
    else if (summary_.no_target_steps > 0)
      std::printf("note: %lld of %lld steps read had no target tokens (e.g. windows of only N bases): logged "
                  "without a loss and left out of the loss figures\n",
                  (long long)summary_.no_target_steps, (long long)summary_.checked_steps);
    std::printf("metrics: %s\n", cfg_.metrics_path().c_str());
    if (!summary_.last_checkpoint.empty()) std::printf("checkpoints: %s\n", ckpt_dir_.c_str());
    if (!summary_.final_model_dir.empty())
      std::printf("final model (Hugging Face format): %s\n", summary_.final_model_dir.c_str());
  }

  const TrainConfig& cfg_;
  const Device device_;
  const std::string config_header_;  // atop the run's config.yaml: where the config came from
  DistEnv env_;
  bool root_ = true;                    // rank 0 (or the only process): logs, writes, exports
  std::unique_ptr<Coordinator> coord_;  // multi-process only
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> cp_comm_;  // context parallelism: this rank's group
  int dp_rank_ = 0, dp_world_ = 1;         // this rank's data-parallel group, and how many there are
  std::unique_ptr<SequenceCorpus> train_set_, val_set_;
  std::unique_ptr<BatchSource> data_, val_data_;
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<AdamW> opt_;
  // zero2 and fsdp: the gradients (fsdp: the parameters too) are sharded (train/fsdp.h).
  bool sharded_gradients() const {
    return cfg_.distributed.strategy == ParallelStrategy::Zero2 || cfg_.distributed.strategy == ParallelStrategy::Fsdp;
  }
  std::unique_ptr<StepSync> sync_;  // multi-process: GradientSync (ddp, zero1), or FsdpSync (fsdp_ under fsdp)
  FsdpSync* fsdp_ = nullptr;
  std::unique_ptr<Prefetcher> prefetch_;
  MetricSinks metrics_;
  std::unique_ptr<JsonlSink> quant_log_;  // this rank's FP8 statistics (quant_stats_config.quant_log_dir)
  int64_t stats_every_ = 0;               // fp8_stats_interval(cfg_)
  std::string stats_note_;                // where stats_every_ came from (printed once)
  std::string out_dir_, ckpt_dir_, resumed_from_;
  int64_t step_ = 0;
  TrainSummary summary_;
  Clock::time_point t_start_;
  int64_t bad_checks_ = 0;           // consecutive non-finite checks: the current streak
  int64_t checked_step_ = 0;         // the last step whose loss was read
  bool no_targets_ = false;          // that step had no label tokens (no loss to log)
  // BIOFM_TEST_NONFINITE_STEP=N: step N's check reads a non-finite loss (the end-of-run rule's test)
  const int64_t test_nonfinite_step_ = [] {
    const char* v = std::getenv("BIOFM_TEST_NONFINITE_STEP");
    return v ? std::atoll(v) : int64_t(-1);
  }();
  int64_t streak_first_step_ = 0;    // the step of its first check
  std::string nonfinite_where_;  // first_nonfinite_tensor at the start of a non-finite streak
  bool have_first_ = false, stopped_ = false;
};

}  // namespace

TrainSummary run_training(const TrainConfig& cfg, const std::string& config_header) {
  return TrainingRun(cfg, config_header).run();
}

}  // namespace biofm
