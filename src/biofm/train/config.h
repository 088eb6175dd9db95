// TrainConfig: what `biofm train --config-name NAME [dotted.key=value ...]` resolves to.
//
// Every field below is a config key with the same dotted path (`model.config.hidden_size` is
// `cfg.model.config.hidden_size`), and its initializer is the key's default: the ESM-2 recipe
// defaults of the BioNeMo seeds (see FACTS.md, "Training defaults in the seeds"). The schema,
// the YAML rendering and the loaders are generated from this struct (train/config.cpp), so a
// new field needs one line there. Loading validates types, enum values, ranges and the
// cross-key rules of check_train_config before anything runs.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "biofm/core/precision.h"
#include "biofm/data/pack.h"
#include "biofm/models/model_config.h"
#include "biofm/ops/options.h"
#include "biofm/train/parallel_strategy.h"


namespace biofm {

namespace config {
class Schema;
class Config;
}  // namespace config

struct TrainConfig {
  // model.config: the architecture keys, named as in Hugging Face config.json (models/model_config.h).
  using ModelShape = biofm::ModelShape;

  struct Model {
    std::string family = "esm2";  // a registered family (models/registry.h): esm2 | llama
    std::string init_from;  // "" = random init; else a Hugging Face model directory
    ModelShape config;
    bool operator==(const Model&) const = default;
  };

  struct Dataset {
    // Training data (required): a file, a directory, a glob or a comma-separated list of these
    // (data/input_files.h); in YAML also a list of strings.
    std::string path;
    std::string format = "auto";  // auto (from each file's extension) | fasta | csv | tsv | jsonl | text
    std::string column = "sequence";       // csv / tsv / jsonl field holding the sequence
    int max_seq_length = 1024;             // tokens per sequence incl. special tokens
    double mlm_probability = 0.15;         // ESM-2 masking
    BatchMode packing = BatchMode::Thd;    // thd (packed) | bshd (padded)
    int max_tokens_per_batch = 8192;       // THD token budget per micro batch
    int micro_batch_size = 8;              // BSHD sequences per micro batch
    int pad_to_multiple_of = 1;            // THD total tokens padded to a multiple (FP8: 16)
    bool shuffle = true;
    int stride = 200;                      // Llama windowing overlap, in tokens
    bool uppercase_labels = false;         // genomic masking: a/c/g/t labels -> A/C/G/T
    std::string val_path;                  // "" = no validation; else as path
    int64_t val_every_n_steps = 0;         // 0 = off
    int64_t val_max_batches = 0;           // 0 = the whole validation set
    // Prepared datasets (`biofm prepare`): a path that is a directory holding manifest.json is
    // read by memory map; split picks its shards (val_split for val_path).
    std::string split = "train";           // train | val | test
    std::string val_split = "val";         // train | val | test
    bool verify_checksums = true;          // CRC32 of every prepared shard at start
    std::string on_error = "fail";         // fail | skip: malformed records and truncated files
    // Streaming (data/stream.h): raw files of `path` read as a stream through a shuffle buffer
    // instead of into memory. A prepared directory is memory-mapped either way.
    bool streaming = false;
    // A prepared directory with a cluster index (prepare --cluster-column): one sample per
    // cluster per epoch, a member drawn anew each epoch (ESM-2's UniRef50/90 sampling).
    bool cluster_sampling = true;
    int64_t shuffle_buffer = 10000;        // items (records; Llama: windows) in the buffer
    // Blend: one weight per entry of the path list; each entry is then a source sampled in
    // that proportion (data/blend.h). [] = the entries are concatenated.
    std::vector<double> weights;
    bool operator==(const Dataset&) const = default;
  };

  struct Optimizer {  // AdamW
    double lr = 4e-4;
    std::vector<double> betas = {0.9, 0.98};
    double eps = 1e-8;
    double weight_decay = 0.01;
    bool no_decay_on_1d_and_embeddings = false;  // OpenGenome2 parameter grouping
    bool offload = false;  // state in host memory, updated by the CPU (train/optimizer.h)
    bool operator==(const Optimizer&) const = default;
  };

  struct Scheduler {
    std::string type = "warmup_linear";  // warmup_linear | warmup_cosine | constant
    int64_t warmup_steps = 2000;
    double decay_fraction = 0.9;  // decay ends at this fraction of num_train_steps, then flat
    double min_lr_ratio = 0.1;    // final lr = min_lr_ratio * optimizer.lr
    bool operator==(const Scheduler&) const = default;
  };

  struct Checkpoint {
    std::string ckpt_dir;  // "" = <output_dir>/checkpoints
    int64_t save_every_n_steps = 1000;  // 0 = only at the end
    int max_checkpoints = 5;            // step_N directories kept; 0 = keep all
    bool resume_from_checkpoint = true;
    bool save_final_model = true;       // <ckpt_dir>/final_model in Hugging Face format
    bool operator==(const Checkpoint&) const = default;
  };

  struct Logger {
    int64_t frequency = 10;                    // steps between log lines / metrics records
    std::string metrics_file = "metrics.jsonl";  // relative to output_dir ("" = none)
    bool tensorboard = true;                   // event files in <output_dir>/tensorboard/
    bool operator==(const Logger&) const = default;
  };

  // FP8 GEMMs in the transformer layers (the recipes' fp8_config; docs/PRECISION.md).
  struct Fp8 {
    bool enabled = false;
    std::string fp8_format = "HYBRID";                // HYBRID (E4M3 forward, E5M2 gradients) | E4M3
    std::string fp8_recipe = "Float8CurrentScaling";  // a Transformer Engine recipe class name
    // fp8_recipe_kwargs.*, Transformer Engine's names (each applies to the recipes that have it).
    struct Kwargs {
      int64_t amax_history_len = 1024;         // DelayedScaling
      std::string amax_compute_algo = "max";   // DelayedScaling: max | most_recent
      int64_t margin = 0;                      // DelayedScaling (MXFP8BlockScaling accepts it; biofm ignores it there)
      bool reduce_amax = true;                 // DelayedScaling (one process: nothing to reduce)
      bool use_f32_scales = false;             // Float8BlockScaling: false = power-of-two scales
      bool fp8_dpa = false;                    // FP8 attention (ops/attention/op.h)
      bool fp8_mha = false;
      bool operator==(const Kwargs&) const = default;
    } fp8_recipe_kwargs;
    int64_t stats_interval = 0;  // FP8 statistics into the metrics every N steps; 0 = off
    // The recipes' fp8_config.quantized_model_init_kwargs (older recipes: fp8_model_init_kwargs):
    // Transformer Engine's quantized_model_init, weights held only in FP8. Only enabled=false (the
    // recipes' default) is accepted: biofm keeps bf16/fp32 weights and quantizes them each step.
    struct ModelInit {
      bool enabled = false;
      bool operator==(const ModelInit&) const = default;
    } quantized_model_init_kwargs, fp8_model_init_kwargs;
    bool operator==(const Fp8&) const = default;
  };

  // The recipes' FP8 statistics switch, as they write it: quant_stats_config (ESM-2, OpenGenome2
  // recipes) or fp8_stats_config (older Llama 3 recipe; fp8_stats_file, fp8_log_dir). enabled
  // turns fp8_config's statistics on (fp8_stats_interval() below); the statistics are biofm's
  // (docs/PRECISION.md), not Transformer Engine's debug features.
  struct QuantStats {
    bool enabled = false;
    // Transformer Engine's debug-feature YAML (nvdlfw_inspect): biofm takes only the freq of its
    // LogFp8TensorStats entries as the interval. Relative to the working directory.
    std::string quant_stats_file;
    // Also write each rank's statistics to <quant_log_dir>/rank_<r>/quant_stats.jsonl (relative
    // to output_dir); "" = the metrics only.
    std::string quant_log_dir;
    bool log_to_wandb = false;  // biofm has no W&B logger: must stay false
    bool operator==(const QuantStats&) const = default;
  };
  struct Fp8Stats {
    bool enabled = false;
    std::string fp8_stats_file;  // as quant_stats_config.quant_stats_file
    std::string fp8_log_dir;     // as quant_stats_config.quant_log_dir
    bool operator==(const Fp8Stats&) const = default;
  };

  // NVFP4 in the transformer layers (the recipes' fp4_config).
  struct Fp4 {
    bool enabled = false;
    std::string fp4_recipe = "NVFP4BlockScaling";
    std::string fp4_format = "E2M1";
    struct Kwargs {
      bool disable_rht = false;                  // random Hadamard transform of the wgrad inputs
      bool disable_stochastic_rounding = false;  // of the gradients
      bool disable_2d_quantization = false;      // 16x16 weight blocks
      bool operator==(const Kwargs&) const = default;
    } fp4_recipe_kwargs;
    bool operator==(const Fp4&) const = default;
  };

  // An nsys capture window: cudaProfilerStart before step start_step, Stop after end_step.
  struct Profiler {
    bool enabled = false;     // the recipes' switch: true = steps 10-15 unless start/end are set
    int64_t start_step = -1;  // -1 = off
    int64_t end_step = -1;
    bool range_times = false;  // time the NVTX ranges over the window (core/range_timer.h)
    bool operator==(const Profiler&) const = default;
  };

  // Runtime options of the ops (ops/options.h).
  struct Ops {
    ops::AttentionBackend attention = ops::AttentionBackend::Auto;
    bool attention_verbose = false;
    bool attention_check = false;
    bool sdpa_autotune = false;
    bool sdpa_dense = true;
    bool attention_packed_qkv = true;
    bool gemm_fused_bgrad = false;
    bool gemm_inplace_splitk = false;
    bool gemm_fused_gelu = true;
    bool gemm_autotune = false;
    bool wgrad_stream = true;
    bool fp8_release_inputs = true;
    bool fp8_gelu_codes = true;
    bool fp8_norm_codes = true;
    bool fp8_weights_ahead = true;
    bool adamw_ahead = true;
    bool operator==(const Ops&) const = default;
  };

  // Multi-process runs (ignored by a single process); see train/data_parallel.h.
  struct Distributed {
    ParallelStrategy strategy = ParallelStrategy::Ddp;  // ddp | zero1 | zero2
    int bucket_mb = 25;           // gradient reduction bucket size
    bool bf16_reduce = false;     // gradients travel (and are summed) as bf16
    bool nccl_symmetric = false;  // ddp/zero: reduce in NCCL symmetric memory (registered windows)
    int step_timeout_s = 0;       // a step that long on any rank fails the run (0: 5x recent steps, >= 60 s)
    int io_timeout_s = 1800;      // the same for a step's validation, checkpoint or export
    int heartbeat_timeout_s = 30; // a rank silent that long (dead or frozen): the run fails
    int rendezvous_timeout_s = 300;  // every rank must have arrived at rank 0 by then
    int comm_sms = 0;             // NCCL: most SMs (thread blocks) a collective may use; 0 = NCCL's choice
    bool operator==(const Distributed&) const = default;
  };

  int64_t seed = 42;
  Device device = Device::CPU;  // cpu | cuda
  int64_t num_train_steps = 1000;
  int grad_acc_steps = 1;
  double clip_grad_norm = 1.0;  // 0 disables clipping
  Precision precision = Precision::F32;  // fp32 | bf16-mixed (fp32 master, bf16 compute) | bf16 (pure bf16 params)
  int num_threads = 0;                    // CPU threads; 0 = all cores
  std::string output_dir = "runs/default";
  bool recompute = false;  // activation recompute in backward
  int recompute_layers = -1;  // with recompute: how many layers (the first ones) recompute; -1 = all
  int cp_size = 1;  // context parallelism: ranks that share each batch's sequences (the recipes' key)
  bool log_mfu = false;  // also the recipes' train/mfu_pct and train/tflops_per_gpu (the recipes' key)

  Model model;
  Dataset dataset;
  Optimizer optimizer;
  Scheduler scheduler;
  Checkpoint checkpoint;
  Logger logger;
  Fp8 fp8_config;
  Fp4 fp4_config;
  QuantStats quant_stats_config;
  Fp8Stats fp8_stats_config;
  std::vector<double> fp8_layers, fp4_layers;  // 1-indexed layer lists; empty = not given
  Ops ops;
  Profiler profiler;
  Distributed distributed;

  // checkpoint.ckpt_dir, or <output_dir>/checkpoints when empty.
  std::string resolved_ckpt_dir() const;
  // <output_dir>/<logger.metrics_file> (as is when absolute); "" when metrics_file is empty.
  std::string metrics_path() const;
  // <output_dir>/<quant_stats_config.quant_log_dir or fp8_stats_config.fp8_log_dir>/rank_<rank>/
  // quant_stats.jsonl (the directory as is when absolute); "" when neither is set.
  std::string quant_stats_path(int rank) const;

  bool operator==(const TrainConfig&) const = default;
};

// Loads `configs_dir/name.yaml` (composing its `defaults:`), applies `key=value` overrides and
// validates everything; throws biofm::Error listing every problem (unknown keys come with the
// nearest valid key; a missing name lists the available configs). notes (optional): what the
// recipes' spellings were read as (config::Config::notes) and other remarks on the config, for
// the command to print.
// overridden (optional): the keys that a command-line override set.
TrainConfig load_train_config(const std::string& configs_dir, const std::string& name,
                              const std::vector<std::string>& overrides = {},
                              std::vector<std::string>* notes = nullptr,
                              std::set<std::string>* overridden = nullptr);
// The same from YAML text (tests, saved run configs). `defaults:` in it is looked up in
// configs_dir when given.
TrainConfig load_train_config_string(const std::string& yaml,
                                     const std::vector<std::string>& overrides = {},
                                     const std::string& configs_dir = "");

// With model.init_from, the architecture is the directory's (its config.json): model.config
// takes the directory's values. A key that differs from them and was set on the command line
// (`overridden`) is an error naming it; one that came from a config file is reported in the
// returned note, which names each key that is not used. The directory's family must be
// model.family. Nothing is changed (and "" returned) without model.init_from.
std::string adopt_init_from_architecture(TrainConfig& cfg, const std::set<std::string>& overridden);

// Every key as "key=value", in schema order (one line each): for comparing two configs.
std::vector<std::string> config_lines(const TrainConfig& cfg);

// The resolved config as YAML, every key present; load_train_config_string(to_yaml(c)) == c.
// Saved as config.yaml in run and checkpoint directories.
std::string to_yaml(const TrainConfig& cfg, const std::string& header = "");

// The interval of the FP8 statistics (steps; 0 = off): fp8_config.stats_interval when > 0; else,
// with quant_stats_config.enabled or fp8_stats_config.enabled, the smallest freq of the enabled
// LogFp8TensorStats entries of quant_stats_file / fp8_stats_file when that file exists, and
// otherwise kDefaultQuantStatsInterval. Reads the file (a malformed one throws biofm::Error);
// `note`, when given, receives a line saying where the interval came from ("" when off or set
// by stats_interval).
constexpr int64_t kDefaultQuantStatsInterval = 10;  // the freq of the recipes' fp8_debugging_stats.yaml
int64_t fp8_stats_interval(const TrainConfig& cfg, std::string* note = nullptr);

// Cross-key rules (divisibility, family-specific settings, required paths); throws one
// biofm::Error naming the keys of every violated rule. The loaders call it.
void check_train_config(const TrainConfig& cfg);

// The schema behind TrainConfig (keys, types, defaults, ranges, help) and conversions.
const config::Schema& train_config_schema();
TrainConfig train_config_from(const config::Config& c);
config::Config to_config(const TrainConfig& cfg);

}  // namespace biofm
