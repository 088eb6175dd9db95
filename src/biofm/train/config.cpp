#include "biofm/train/config.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <type_traits>

#include <yaml-cpp/yaml.h>

#include "biofm/core/error.h"
#include "biofm/data/input_files.h"
#include "biofm/io/config.h"
#include "biofm/models/registry.h"
#include "biofm/ops/options.h"
#include "biofm/train/parallel_strategy.h"
#include "biofm/train/setup.h"

namespace biofm {

namespace {

using TC = TrainConfig;

// --- field <-> value -------------------------------------------------------------------------

// Config spellings of the enum-valued keys.
template <class E>
struct EnumNames;
template <>
struct EnumNames<Device> {
  static constexpr std::pair<Device, const char*> items[] = {{Device::CPU, "cpu"}, {Device::CUDA, "cuda"}};
};
template <>
struct EnumNames<Precision> {
  static constexpr std::pair<Precision, const char*> items[] = {
      {Precision::F32, "fp32"}, {Precision::Bf16, "bf16"}, {Precision::Bf16Mixed, "bf16-mixed"}};
};
template <>
struct EnumNames<BatchMode> {
  static constexpr std::pair<BatchMode, const char*> items[] = {{BatchMode::Thd, "thd"}, {BatchMode::Bshd, "bshd"}};
};
template <>
struct EnumNames<ops::AttentionBackend> {
  static constexpr std::pair<ops::AttentionBackend, const char*> items[] = {
      {ops::AttentionBackend::Auto, "auto"},
      {ops::AttentionBackend::Cudnn, "cudnn"},
      {ops::AttentionBackend::Fallback, "fallback"}};
};

template <>
struct EnumNames<ParallelStrategy> {
  static constexpr std::pair<ParallelStrategy, const char*> items[] = {
      {ParallelStrategy::Ddp, "ddp"}, {ParallelStrategy::Zero1, "zero1"}, {ParallelStrategy::Zero2, "zero2"},
      {ParallelStrategy::Fsdp, "fsdp"}};
};

template <class E>
std::vector<std::string> enum_choices() {
  std::vector<std::string> v;
  for (const auto& [e, name] : EnumNames<E>::items) v.push_back(name);
  return v;
}

template <class T>
config::Value to_value(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    for (const auto& [e, name] : EnumNames<T>::items)
      if (e == v) return std::string(name);
    fail("config: an enum value has no name");
  } else if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    return int64_t(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return double(v);
  } else {
    return v;  // std::string, std::vector<double>
  }
}

template <class T>
T from_value(const config::Value& v) {
  if constexpr (std::is_enum_v<T>) {
    const std::string& s = std::get<std::string>(v);  // one of the choices (the schema checked it)
    for (const auto& [e, name] : EnumNames<T>::items)
      if (s == name) return e;
    fail("config: '", s, "' is not a valid value");
  } else if constexpr (std::is_same_v<T, bool>) {
    return std::get<bool>(v);
  } else if constexpr (std::is_integral_v<T>) {
    return T(std::get<int64_t>(v));  // the schema range keeps it within T
  } else if constexpr (std::is_floating_point_v<T>) {
    return T(std::get<double>(v));
  } else {
    return std::get<T>(v);
  }
}

// --- the key table ---------------------------------------------------------------------------

// Options of one key, given with designated initializers; the ones left out keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
struct Opt {
  config::Range range;
  std::vector<std::string> choices;  // for std::string fields that only take some values
  int list_size = -1;
  std::vector<std::string> aliases;
  const char* help = "";
  bool string_list = false;  // std::string fields: a YAML list is accepted, joined with ','
  bool whole_numbers = false;  // std::vector<double> fields: every element a whole number
  bool layer_numbers = false;  // std::vector<double> fields: 1-indexed layers, each once (KeySpec)
};

struct Binding {
  std::string key;
  std::function<config::Value(const TC&)> get;
  std::function<void(TC&, const config::Value&)> set;
};

struct Registry {
  config::Schema schema;
  std::vector<Binding> bindings;

  template <class F>
  void bind(const char* key, F field, Opt opt) {
    using T = std::remove_cvref_t<decltype(field(std::declval<TC&>()))>;
    static const TC defaults{};
    config::KeySpec spec;
    spec.key = key;
    spec.range = opt.range;
    spec.list_size = opt.list_size;
    spec.aliases = opt.aliases;
    spec.help = opt.help;
    spec.string_list = opt.string_list;
    spec.whole_numbers = opt.whole_numbers || opt.layer_numbers;
    spec.layer_numbers = opt.layer_numbers;
    if constexpr (std::is_enum_v<T>) {
      spec.type = config::Type::Enum;
      spec.choices = enum_choices<T>();
    } else if constexpr (std::is_same_v<T, bool>) {
      spec.type = config::Type::Bool;
    } else if constexpr (std::is_integral_v<T>) {
      spec.type = config::Type::Int;
      // Keep values within the field's type.
      double lo = double(std::numeric_limits<T>::min()), hi = double(std::numeric_limits<T>::max());
      if (!spec.range.lo || *spec.range.lo < lo) spec.range.lo = lo, spec.range.lo_open = false;
      if (!spec.range.hi || *spec.range.hi > hi) spec.range.hi = hi, spec.range.hi_open = false;
      if (std::is_same_v<T, int64_t> && spec.range.hi == hi) spec.range.hi.reset();
      if (std::is_same_v<T, int64_t> && spec.range.lo == lo) spec.range.lo.reset();
    } else if constexpr (std::is_floating_point_v<T>) {
      spec.type = config::Type::Float;
    } else if constexpr (std::is_same_v<T, std::string>) {
      spec.type = opt.choices.empty() ? config::Type::String : config::Type::Enum;
      spec.choices = opt.choices;
    } else {
      static_assert(std::is_same_v<T, std::vector<double>>, "unsupported config field type");
      spec.type = config::Type::FloatList;
    }
    spec.default_value = to_value(field(defaults));
    schema.add(std::move(spec));
    bindings.push_back({key, [field](const TC& c) { return to_value(field(c)); },
                        [field](TC& c, const config::Value& v) { field(c) = from_value<T>(v); }});
  }
};

// BIND(a.b.c, options...): the key "a.b.c" is the field cfg.a.b.c.
#define BIND(path, ...) \
  r.bind(#path, [](auto& c) -> auto& { return c.path; }, Opt{__VA_ARGS__})

using config::closed;
using config::ge;
using config::gt;
using config::half_open;

// fp8_config.fp8_recipe: Transformer Engine's recipe class names, short or fully qualified.
std::vector<std::string> fp8_recipe_choices() {
  std::vector<std::string> v;
  for (const char* n : {"Float8CurrentScaling", "DelayedScaling", "Float8BlockScaling", "MXFP8BlockScaling",
                        "NVFP4BlockScaling"}) {
    v.push_back(n);
    v.push_back(std::string("transformer_engine.common.recipe.") + n);
  }
  return v;
}

Registry build_registry() {
  Registry r;
  // top level
  BIND(seed, .range = ge(0), .help = "seed of the counter-based RNG (init, shuffling, masking)");
  BIND(device);
  BIND(num_train_steps, .range = gt(0),
       .aliases = {"max_steps", "lr_scheduler_kwargs.num_training_steps"},
       .help = "optimizer steps to train");
  BIND(grad_acc_steps, .range = ge(1), .aliases = {"gradient_accumulation_steps"},
       .help = "micro batches per optimizer step");
  BIND(clip_grad_norm, .range = ge(0), .aliases = {"max_grad_norm", "grad_clip"},
       .help = "global grad-norm clip; 0 disables");
  BIND(precision, .aliases = {"dtype", "mixed_precision"},
       .help = "fp32 | bf16-mixed (fp32 master weights, bf16 compute) | bf16 (pure bf16 weights, "
               "fp32 grads and AdamW state; CUDA only)");
  BIND(num_threads, .range = ge(0), .help = "CPU threads; 0 = all cores");
  BIND(output_dir, .aliases = {"out_dir", "run_dir"}, .help = "run directory");
  BIND(recompute, .aliases = {"activation_checkpointing", "gradient_checkpointing"},
       .help = "recompute activations in backward");
  BIND(cp_size, .range = ge(1), .aliases = {"distributed.cp_size", "context_parallel_size"},
       .help = "context parallelism: each batch's sequences are split over groups of this many ranks (the "
               "recipes' cp_size); world_size / cp_size groups train data-parallel; CPU processes only for now");
  BIND(recompute_layers, .range = ge(-1), .aliases = {"activation_checkpointing_layers"},
       .help = "with recompute: recompute only the first N layers and keep the activations of the rest "
               "(trades memory for speed); -1 = all layers");
  BIND(log_mfu, .help = "also log the recipes' train/mfu_pct (MFU in percent) and train/tflops_per_gpu beside "
                        "train/mfu (a fraction, always logged)");

  BIND(ops.attention, .help = "CUDA attention: auto (cuDNN SDPA where it takes the shape, else the CUDA kernels) | "
                              "cudnn | fallback");
  BIND(ops.attention_verbose, .help = "print once per shape which attention path ran");
  BIND(ops.attention_check, .help = "check cu_seqlens/seq_lens on the host at every attention call (syncs; debug)");
  BIND(ops.sdpa_autotune, .help = "time every cuDNN SDPA engine configuration on a graph's first use");
  BIND(ops.attention_packed_qkv, .help = "attention reads q, k, v in place from the QKV projection's output "
                                         "(false: unpacked into separate tensors first)");
  BIND(ops.sdpa_dense, .help = "equal-length batches (full windows) take cuDNN's dense SDPA graph, not the ragged one");
  BIND(ops.gemm_fused_bgrad, .help = "bias gradients from cuBLASLt's BGRADB epilogue where it applies (default: "
                                     "the column-sum kernel)");
  BIND(ops.gemm_inplace_splitk, .help = "restrict split-K GEMM algorithms to in-place reduction (experiment)");
  BIND(ops.gemm_fused_gelu, .help = "ESM-2 MLP: GELU fused into the GEMMs (CUTLASS epilogues; bf16 on Hopper)");
  BIND(ops.gemm_autotune, .help = "time cuBLASLt's candidate algorithms on each GEMM shape's first call and keep "
                                  "the fastest (one host sync per shape bucket; the choices are kept in checkpoints)");
  BIND(ops.wgrad_stream, .help = "backward runs each layer's weight and bias gradients on a second CUDA stream, "
                                 "beside the input gradients (same results)");
  BIND(ops.fp8_release_inputs, .help = "FP8 layers keep only their inputs' FP8 codes for backward, not the bf16 inputs "
                                       "(the norms' outputs, the MLP activation)");
  BIND(ops.fp8_gelu_codes, .help = "FP8 DelayedScaling: the ESM-2 MLP's GELU and its gradient write the next GEMM's "
                                   "FP8 codes directly (no bf16 copy; same results)");
  BIND(ops.fp8_norm_codes, .help = "FP8 DelayedScaling: the norms before the q|k|v projection and the MLP write its "
                                   "FP8 codes directly (no bf16 copy; same results)");
  BIND(ops.fp8_weights_ahead, .help = "FP8 (current or delayed scaling): each layer's weight codes are made on a "
                                      "second CUDA stream while the layer before it runs (same codes; not under fsdp)");
  BIND(ops.adamw_ahead, .help = "one process: AdamW's update of each layer runs in the next step's forward, on a second "
                                "CUDA stream while the layer before it runs (same results; not sharded or offloaded)");

  BIND(fp8_config.enabled, .help = "FP8 GEMMs in the transformer layers (CUDA: bf16-mixed or bf16 precision on "
                                   "Hopper; CPU: emulated, as the reference)");
  BIND(fp8_config.fp8_format, .choices = {"HYBRID", "E4M3"},
       .help = "HYBRID: E4M3 activations and weights, E5M2 gradients; E4M3: E4M3 everywhere");
  BIND(fp8_config.fp8_recipe, .choices = fp8_recipe_choices(),
       .help = "Transformer Engine recipe (the short name or transformer_engine.common.recipe.<name>): "
               "Float8CurrentScaling | DelayedScaling | Float8BlockScaling | MXFP8BlockScaling | NVFP4BlockScaling");
  BIND(fp8_config.fp8_recipe_kwargs.amax_history_len, .range = ge(1), .help = "DelayedScaling: amax history length");
  BIND(fp8_config.fp8_recipe_kwargs.amax_compute_algo, .choices = {"max", "most_recent"},
       .help = "DelayedScaling: the amax a scale comes from (max of the history, or the last step's)");
  BIND(fp8_config.fp8_recipe_kwargs.margin, .range = ge(0), .help = "DelayedScaling: scale = fp8_max * 2^-margin / amax");
  BIND(fp8_config.fp8_recipe_kwargs.reduce_amax, .help = "DelayedScaling: amax reduced over ranks (see docs/PRECISION.md)");
  BIND(fp8_config.fp8_recipe_kwargs.use_f32_scales,
       .help = "Float8BlockScaling: fp32 scales (false: scales rounded down to powers of two, TE's default)");
  BIND(fp8_config.fp8_recipe_kwargs.fp8_dpa, .help = "FP8 attention (DelayedScaling / Float8CurrentScaling; on the GPU head dim 128 and full windows)");
  BIND(fp8_config.fp8_recipe_kwargs.fp8_mha, .help = "FP8 multi-head attention (not implemented: must be false)");
  BIND(fp8_config.stats_interval, .range = ge(0), .aliases = {"fp8_stats_interval", "quant_stats_interval"},
       .help = "every N steps: per-layer amax, scale and under/overflow fractions of the FP8 tensors into the "
               "metrics; 0 = off");
  BIND(fp8_config.quantized_model_init_kwargs.enabled,
       .help = "the recipes' Transformer Engine quantized_model_init (weights held only in FP8): must be false, "
               "biofm keeps bf16/fp32 weights and quantizes them each step");
  BIND(fp8_config.fp8_model_init_kwargs.enabled,
       .help = "the older recipes' name of fp8_config.quantized_model_init_kwargs.enabled: must be false");
  BIND(quant_stats_config.enabled,
       .help = "the recipes' FP8 statistics switch: statistics every fp8_config.stats_interval steps, or when "
               "that is 0 every freq of quant_stats_file's LogFp8TensorStats, or every 10 steps");
  BIND(quant_stats_config.quant_stats_file,
       .help = "the recipes' Transformer Engine debug-feature YAML: only its LogFp8TensorStats freq is read "
               "(relative to the working directory; a missing file: the default interval)");
  BIND(quant_stats_config.quant_log_dir,
       .help = "each rank's FP8 statistics also to <dir>/rank_<r>/quant_stats.jsonl (relative to output_dir); "
               "\"\" = the metrics only");
  BIND(quant_stats_config.log_to_wandb, .help = "must be false: biofm has no W&B logger (the statistics go to "
                                                "metrics.jsonl and TensorBoard; tools/metrics_to_wandb.py)");
  BIND(fp8_stats_config.enabled, .help = "the older Llama 3 recipe's name of quant_stats_config.enabled");
  BIND(fp8_stats_config.fp8_stats_file, .help = "as quant_stats_config.quant_stats_file");
  BIND(fp8_stats_config.fp8_log_dir, .help = "as quant_stats_config.quant_log_dir");
  BIND(fp4_config.enabled, .help = "NVFP4 in the transformer layers (emulated on the CPU and on Hopper; no Blackwell kernels yet)");
  BIND(fp4_config.fp4_recipe, .choices = {"NVFP4BlockScaling", "transformer_engine.common.recipe.NVFP4BlockScaling"});
  BIND(fp4_config.fp4_format, .choices = {"E2M1"});
  BIND(fp4_config.fp4_recipe_kwargs.disable_rht, .help = "no random Hadamard transform of the weight-gradient inputs");
  BIND(fp4_config.fp4_recipe_kwargs.disable_stochastic_rounding, .help = "gradients round to nearest");
  BIND(fp4_config.fp4_recipe_kwargs.disable_2d_quantization, .help = "weights in 1x16 blocks instead of 16x16");
  BIND(fp8_layers, .range = ge(1), .help = "1-indexed layers in FP8 (empty: all, or those fp4_layers leaves)",
       .layer_numbers = true);
  BIND(fp4_layers, .range = ge(1), .help = "1-indexed layers in FP4 (empty: all, or those fp8_layers leaves)",
       .layer_numbers = true);

  // model
  BIND(model.family, .choices = family_names());
  BIND(model.init_from, .aliases = {"model_tag", "model_name_or_path", "pretrained"},
       .help = "Hugging Face model directory to start from; empty = random init");
  BIND(model.config.hidden_size, .range = gt(0), .aliases = {"d_model", "dim", "n_embd"});
  BIND(model.config.num_hidden_layers, .range = gt(0), .aliases = {"num_layers", "n_layer"});
  BIND(model.config.num_attention_heads, .range = gt(0), .aliases = {"num_heads", "n_head"});
  BIND(model.config.num_key_value_heads, .range = ge(0), .aliases = {"num_kv_heads"},
       .help = "0 = num_attention_heads");
  BIND(model.config.intermediate_size, .range = gt(0), .aliases = {"ffn_hidden_size", "ffn_dim"});
  BIND(model.config.vocab_size, .range = gt(0));
  BIND(model.config.max_position_embeddings, .range = gt(0));
  BIND(model.config.layer_norm_eps, .range = gt(0));
  BIND(model.config.rms_norm_eps, .range = gt(0));
  BIND(model.config.initializer_range, .range = gt(0));
  BIND(model.config.token_dropout);
  BIND(model.config.rope_theta, .range = gt(0));
  BIND(model.config.tie_word_embeddings);
  BIND(model.config.hidden_act, .choices = {"gelu", "silu"});
  BIND(model.config.rope_scaling_type, .choices = {"", "llama3"}, .aliases = {"rope_type", "rope_scaling"},
       .help = "\"\" (none) | llama3");
  BIND(model.config.rope_scaling_factor, .range = gt(0), .aliases = {"factor"});
  BIND(model.config.low_freq_factor, .range = gt(0));
  BIND(model.config.high_freq_factor, .range = gt(0));
  BIND(model.config.original_max_position_embeddings, .range = gt(0));
  BIND(model.config.embedding_init_std, .range = ge(0),
       .help = "0 = initializer_range; Spike-No-More uses 1.0");
  BIND(model.config.scaled_init, .help = "o_proj/down_proj std = initializer_range/sqrt(2L)");

  // dataset
  BIND(dataset.path, .aliases = {"data_path", "train_path", "load_dataset_kwargs.path"},
       .help = "training data: a file, a directory, a glob or a list of these (a YAML list or "
               "comma-separated); fasta, csv, tsv, jsonl, text, parquet; .gz or .zst allowed",
       .string_list = true);
  BIND(dataset.format, .choices = {"auto", "fasta", "csv", "tsv", "jsonl", "text", "parquet"},
       .help = "auto: from each file's extension");
  BIND(dataset.column, .aliases = {"sequence_column", "text_column"});
  BIND(dataset.max_seq_length, .range = ge(3), .aliases = {"seq_length", "max_length"});
  BIND(dataset.mlm_probability, .range = closed(0, 1));
  BIND(dataset.packing, .aliases = {"use_sequence_packing", "sequence_packing"},
       .help = "thd (packed) | bshd (padded)");
  BIND(dataset.max_tokens_per_batch, .range = gt(0), .aliases = {"token_micro_batch_size"});
  BIND(dataset.micro_batch_size, .range = gt(0), .aliases = {"batch_size"},
       .help = "bshd: sequences per micro batch (thd batches are dataset.max_tokens_per_batch tokens instead)");
  BIND(dataset.pad_to_multiple_of, .range = ge(1),
       .aliases = {"pad_sequences_to_be_divisible_by"});
  BIND(dataset.shuffle);
  BIND(dataset.stride, .range = ge(0));
  BIND(dataset.uppercase_labels);
  BIND(dataset.val_path, .aliases = {"validation_path", "eval_path"},
       .help = "validation data, in the forms dataset.path takes; \"\" = none", .string_list = true);
  BIND(dataset.val_every_n_steps, .range = ge(0), .aliases = {"eval_every_n_steps", "eval_interval"},
       .help = "0 = off");
  BIND(dataset.val_max_batches, .range = ge(0), .help = "0 = all");
  BIND(dataset.split, .choices = {"train", "val", "test"}, .help = "split of a prepared dataset (biofm prepare)");
  BIND(dataset.val_split, .choices = {"train", "val", "test"}, .help = "split of a prepared val_path");
  BIND(dataset.verify_checksums, .help = "check the CRC32 of every prepared shard at start");
  BIND(dataset.on_error, .choices = {"fail", "skip"},
       .help = "malformed record or truncated file: fail naming it | skip and count");
  BIND(dataset.streaming, .aliases = {"load_dataset_kwargs.streaming"},
       .help = "read the raw files of dataset.path as a stream through a shuffle buffer, not into memory");
  BIND(dataset.shuffle_buffer, .range = closed(1, 2147483647), .aliases = {"buffer_size", "shuffle_buffer_size"},
       .help = "streaming: items in the shuffle buffer (records; windows for causal models)");
  BIND(dataset.cluster_sampling,
       .help = "prepared data with clusters (prepare --cluster-column): sample a cluster, then one of its members");
  BIND(dataset.weights, .range = ge(0),
       .help = "blend: one weight per entry of the dataset.path list; [] = concatenate");

  // optimizer (AdamW)
  BIND(optimizer.lr, .range = gt(0), .aliases = {"learning_rate", "adamw_kwargs.lr"});
  BIND(optimizer.betas, .range = half_open(0, 1), .list_size = 2,
       .aliases = {"adamw_kwargs.betas"});
  BIND(optimizer.eps, .range = gt(0), .aliases = {"epsilon", "adam_eps", "adamw_kwargs.eps"});
  BIND(optimizer.weight_decay, .range = ge(0), .aliases = {"wd", "adamw_kwargs.weight_decay"});
  BIND(optimizer.no_decay_on_1d_and_embeddings,
       .help = "no weight decay on biases, 1-D parameters and embeddings");
  BIND(optimizer.offload,
       .help = "fp32 master weights and AdamW moments in host memory, updated by the CPU (for models whose "
               "optimizer state does not fit on the GPUs; device=cpu: accepted, changes nothing)");

  // scheduler
  BIND(scheduler.type, .choices = {"warmup_linear", "warmup_cosine", "constant"},
       .aliases = {"lr_scheduler", "name"});
  BIND(scheduler.warmup_steps, .range = ge(0),
       .aliases = {"num_warmup_steps", "lr_scheduler_kwargs.num_warmup_steps"});
  BIND(scheduler.decay_fraction, .range = closed(0, 1),
       .help = "decay ends at this fraction of num_train_steps, then flat");
  BIND(scheduler.min_lr_ratio, .range = closed(0, 1), .aliases = {"min_lr"});

  // checkpoint
  BIND(checkpoint.ckpt_dir, .aliases = {"dir", "checkpoint_dir"},
       .help = "\"\" = <output_dir>/checkpoints");
  BIND(checkpoint.save_every_n_steps, .range = ge(0), .aliases = {"save_interval", "save_steps"},
       .help = "also the last step; 0 = none (a stop by signal still saves one)");
  BIND(checkpoint.max_checkpoints, .range = ge(0), .aliases = {"keep", "save_total_limit"},
       .help = "0 = keep all");
  BIND(checkpoint.resume_from_checkpoint, .aliases = {"resume"});
  BIND(checkpoint.save_final_model);

  // logger
  BIND(logger.frequency, .range = gt(0), .aliases = {"log_every", "log_interval"});
  BIND(logger.metrics_file, .help = "relative to output_dir; \"\" = none");
  BIND(logger.tensorboard, .help = "TensorBoard event files in <output_dir>/tensorboard/");

  // profiler (nsys: run with --capture-range=cudaProfilerApi)
  BIND(profiler.enabled, .help = "true: the window is steps 10-15 (the recipes' defaults) unless "
                                 "profiler.start_step / end_step are set; false on the command line, or in "
                                 "the file that sets the window, turns it off");
  BIND(profiler.start_step, .range = ge(-1), .help = "cudaProfilerStart before this step (1-based); -1 = off");
  BIND(profiler.end_step, .range = ge(-1), .help = "cudaProfilerStop after this step");
  BIND(profiler.range_times, .help = "time every range (phases, each layer's forward and backward, the gradient "
                                     "sync, each collective) over the window: a per-step table at its end and "
                                     "output_dir/range_times_rankR.json (CUDA events on the GPU)");

  // distributed (multi-process runs: biofm launch, torchrun, srun, mpirun)
  BIND(distributed.strategy, .help = "ddp (replicated optimizer) | zero1 (sharded optimizer state) | zero2 "
                                     "(sharded state and gradients: each layer's reduced to their owners every micro "
                                     "batch) | fsdp (parameters sharded too: each layer gathered as it runs)");
  BIND(distributed.bucket_mb, .range = gt(0), .help = "ddp/zero1: gradient reduction bucket (MiB), overlapped with backward");
  BIND(distributed.bf16_reduce, .help = "reduce gradients in bf16 (half the traffic)");
  BIND(distributed.nccl_symmetric, .help = "ddp/zero1 on NCCL: the reduced gradients live in ncclMemAlloc'd "
                                           "memory registered as a symmetric window (fewer SMs held beside backward; experimental)");
  BIND(distributed.step_timeout_s, .range = ge(0), .help = "a training step this long on any rank fails the run, "
                                                          "naming it (0: adaptive, 5x the slowest of the last 20 "
                                                          "steps and at least 60 s; the first step 600 s)");
  BIND(distributed.io_timeout_s, .range = gt(0), .help = "the same for a step's validation, checkpoint or export");
  BIND(distributed.comm_sms, .range = ge(0), .help = "at most this many SMs for NCCL's reductions (0 = NCCL's "
                                                    "choice; fewer measured slower on 2 H200, docs/PERFORMANCE.md)");
  BIND(distributed.heartbeat_timeout_s, .range = gt(0), .help = "a rank silent this long (dead, frozen) fails the run");
  BIND(distributed.rendezvous_timeout_s, .range = gt(0), .help = "every rank must reach rank 0 within this many "
                                                                 "seconds of starting (else the run fails, naming "
                                                                 "the missing ranks)");

  // The recipes' spellings (their Hydra configs and READMEs; config::RecipeSpelling): read as
  // ours, ignored with a note, or refused saying what to write.
  using config::RecipeSpelling;
  const std::vector<std::pair<std::string, std::string>> packing = {{"true", "thd"}, {"false", "bshd"}};
  const std::string decay_groups =
      "optimizer.no_decay_on_1d_and_embeddings=true leaves 1-D weights (norms, biases) and the embeddings out of "
      "weight decay, as use_weight_decay_grouping=true with skip_embedding_weight_decay=true do";
  const std::string wandb = "biofm writes metrics.jsonl and TensorBoard event files; tools/metrics_to_wandb.py "
                            "makes an offline W&B run of them for `wandb sync`";
  for (RecipeSpelling rs : std::vector<RecipeSpelling>{
           {"use_sequence_packing", "dataset.packing", packing},
           {"dataset.use_sequence_packing", "dataset.packing", packing},
           {"dataset.load_dataset_kwargs.path", "dataset.path"},
           {"dataset.load_dataset_kwargs.streaming", "dataset.streaming"},
           {"adamw_kwargs.lr", "optimizer.lr"},
           {"adamw_kwargs.betas", "optimizer.betas"},
           {"adamw_kwargs.eps", "optimizer.eps"},
           {"adamw_kwargs.weight_decay", "optimizer.weight_decay"},
           {"lr_scheduler_kwargs.num_warmup_steps", "scheduler.warmup_steps"},
           {"validation.data_path", "dataset.val_path"},
           {"validation.eval_interval", "dataset.val_every_n_steps"},
           {"validation.num_batches", "dataset.val_max_batches"},
           {"use_fp32_master_weights", "precision", {{"true", "bf16-mixed"}, {"false", "bf16"}},
            "bf16 compute with fp32 master weights, or bf16 weights only"},
           {"use_megatron_scaled_init", "model.config.scaled_init"},
           {"spike_no_more_embedding_init", "model.config.embedding_init_std", {{"true", "1.0"}, {"false", "0"}}},
           {"validation.enabled", "", {},
            "biofm validates when dataset.val_path is set and dataset.val_every_n_steps > 0 (0 turns it off)"},
           {"use_weight_decay_grouping", "", {}, decay_groups},
           {"skip_embedding_weight_decay", "", {}, decay_groups},
           {"model_tag", "", {},
            "it names the Hugging Face model whose architecture a recipe trains; biofm's configs are named for "
            "them (--config-name esm2_t6_8M, esm2_t33_650M, llama3_1b, og2_7b, ...), and model.init_from=DIR "
            "starts from the weights of a local Hugging Face directory"},
           {"config_name_or_path", "", {}, "pick the architecture with --config-name (configs/*.yaml)"},
           {"use_meta_device", "", {}, "biofm builds the model in place on its device", true},
           {"dataset.use_stateful_dataloader", "", {},
            "checkpoints always keep the data cursor: a resumed run goes on with the next batch", true},
           {"lr_scheduler_kwargs.min_lr_ratio", "scheduler.min_lr_ratio"},
           {"lr_scheduler_kwargs.num_training_steps", "", {},
            "the schedule runs over num_train_steps here (its decay ends at scheduler.decay_fraction of them): "
            "give num_train_steps=N"},
           {"lr_scheduler_kwargs.num_decay_steps", "", {},
            "the decay ends at scheduler.decay_fraction of num_train_steps here (then flat at "
            "scheduler.min_lr_ratio): give scheduler.decay_fraction=num_decay_steps/num_train_steps"},
           {"config_kwargs.attn_input_format", "dataset.packing", {{"thd", "thd"}, {"bshd", "bshd"}}},
           {"dataset.buffer_size", "dataset.shuffle_buffer"},
           {"dataset.pad_sequences_to_be_divisible_by", "dataset.pad_to_multiple_of"},
           {"dataset.load_dataset_kwargs.split", "", {},
            "biofm reads every record of dataset.path (and of a prepared directory, dataset.split); held-out data "
            "is dataset.val_path"},
           {"adamw_kwargs.fused", "", {}, "biofm's AdamW is one fused kernel over all parameters", true},
           {"use_te", "", {}, "biofm runs its own kernels (cuBLASLt, cuDNN), not Transformer Engine's", true},
           {"use_torch_compile", "", {}, "biofm is compiled ahead of time", true},
           {"dataset.num_workers", "", {}, "biofm's loader prepares batches on its own thread ahead of the step", true},
           {"dataset.tokenizer_name", "", {}, "the tokenizer follows model.family (esm2: ESM-2's, llama: nucleotides)",
            true},
           {"dataset.tokenizer_name_or_path", "", {},
            "the tokenizer follows model.family (esm2: ESM-2's, llama: nucleotides)", true},
           {"checkpoint.async_save", "", {}, "checkpoints are written in the step they are due (atomically)", true},
           {"fully_shard_kwargs.*", "", {}, "sharding is distributed.strategy=fsdp (docs/DISTRIBUTED.md)", true},
           {"hydra.*", "", {}, "biofm is not Hydra (--print-config shows the resolved config)", true},
           {"wandb_init_args.*", "", {}, wandb, true},
           {"wandb.*", "", {}, wandb, true},
       })
    r.schema.add_recipe_spelling(std::move(rs));
  return r;
}

#undef BIND

const Registry& registry() {
  static const Registry r = build_registry();
  return r;
}

std::string join_path(const std::string& dir, const std::string& file) {
  if (file.empty()) return "";
  std::filesystem::path p(file);
  if (p.is_absolute() || dir.empty()) return p.string();
  return (std::filesystem::path(dir) / p).string();
}

}  // namespace

std::string TrainConfig::resolved_ckpt_dir() const {
  if (!checkpoint.ckpt_dir.empty()) return checkpoint.ckpt_dir;
  return join_path(output_dir, "checkpoints");
}

std::string TrainConfig::metrics_path() const { return join_path(output_dir, logger.metrics_file); }

std::string TrainConfig::quant_stats_path(int rank) const {
  const std::string& dir =
      !quant_stats_config.quant_log_dir.empty() ? quant_stats_config.quant_log_dir : fp8_stats_config.fp8_log_dir;
  if (dir.empty()) return "";
  const std::filesystem::path p = join_path(join_path(output_dir, dir), "rank_" + std::to_string(rank));
  return (p / "quant_stats.jsonl").lexically_normal().string();
}

namespace {

// Whether a debug-feature YAML map is switched on (`enabled` absent means on, as Transformer
// Engine's debug API reads it).
bool feature_enabled(const YAML::Node& n) { return !n["enabled"] || n["enabled"].as<bool>(); }

// The smallest freq of the enabled LogFp8TensorStats entries of a Transformer Engine debug-feature
// config (nvdlfw_inspect: sections of `enabled`, `layers`, `transformer_engine: {Feature: {...}}`);
// an entry of tensors_struct without freq takes the feature's, and that defaults to 1. 0 when the
// file has no such entry.
int64_t log_fp8_tensor_stats_freq(const YAML::Node& root) {
  int64_t best = 0;
  auto take = [&](const YAML::Node& n, int64_t fallback) {
    const int64_t f = n["freq"] ? n["freq"].as<int64_t>() : fallback;
    if (f > 0 && (best == 0 || f < best)) best = f;
  };
  if (!root || !root.IsMap()) return 0;
  for (const auto& section : root) {
    const YAML::Node s = section.second;
    if (!s.IsMap() || !feature_enabled(s)) continue;
    const YAML::Node te = s["transformer_engine"];  // (a missing key: an undefined node, false)
    if (!te || !te.IsMap()) continue;
    const YAML::Node f = te["LogFp8TensorStats"];
    if (!f || !f.IsMap() || !feature_enabled(f)) continue;
    const int64_t feature_freq = f["freq"] ? f["freq"].as<int64_t>() : 1;
    const YAML::Node ts = f["tensors_struct"];
    if (ts && ts.IsSequence()) {
      for (const auto& t : ts)
        if (t.IsMap()) take(t, feature_freq);
    } else {
      take(f, 1);
    }
  }
  return best;
}

}  // namespace

int64_t fp8_stats_interval(const TrainConfig& cfg, std::string* note) {
  if (note) note->clear();
  if (cfg.fp8_config.stats_interval > 0) return cfg.fp8_config.stats_interval;
  const bool quant = cfg.quant_stats_config.enabled;
  if (!quant && !cfg.fp8_stats_config.enabled) return 0;
  const std::string key = quant ? "quant_stats_config" : "fp8_stats_config";
  const std::string file_key = quant ? "quant_stats_config.quant_stats_file" : "fp8_stats_config.fp8_stats_file";
  const std::string& file = quant ? cfg.quant_stats_config.quant_stats_file : cfg.fp8_stats_config.fp8_stats_file;
  auto say = [&](const std::string& s) {
    if (note) *note = s;
  };
  const std::string fallback = std::to_string(kDefaultQuantStatsInterval);
  if (file.empty()) {
    say("FP8 statistics (" + key + ".enabled) every " + fallback + " steps, the recipes' default "
        "(fp8_config.stats_interval=N sets it)");
    return kDefaultQuantStatsInterval;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    say("FP8 statistics (" + key + ".enabled) every " + fallback + " steps, the recipes' default: " + file_key +
        " '" + file + "' does not exist (fp8_config.stats_interval=N sets the interval)");
    return kDefaultQuantStatsInterval;
  }
  int64_t freq = 0;
  try {
    freq = log_fp8_tensor_stats_freq(YAML::LoadFile(file));
  } catch (const YAML::Exception& e) {
    fail(file_key, " '", file, "' is not a Transformer Engine debug-feature YAML: ", e.what());
  }
  if (freq == 0) {
    say("FP8 statistics (" + key + ".enabled) every " + fallback + " steps, the recipes' default: " + file_key +
        " '" + file + "' has no enabled LogFp8TensorStats entry (fp8_config.stats_interval=N sets the interval)");
    return kDefaultQuantStatsInterval;
  }
  say("FP8 statistics (" + key + ".enabled) every " + std::to_string(freq) + " steps, the LogFp8TensorStats freq of " +
      file + " (biofm logs amax, scale, underflow and overflow per FP8 tensor; the file's other features and "
      "stats are not read)");
  return freq;
}

const config::Schema& train_config_schema() { return registry().schema; }

TrainConfig train_config_from(const config::Config& c) {
  BIOFM_CHECK(&c.schema() == &train_config_schema(), "config was not made with the TrainConfig schema");
  TrainConfig t;
  for (const auto& b : registry().bindings) b.set(t, c.get(b.key));
  // profiler.enabled is the recipes' switch; biofm's window is start_step..end_step. A false
  // given on the command line, or in the file that sets the window (the recipes' own
  // `enabled: false, start_step: 10, end_step: 15`), turns the window off; true alone takes the
  // recipes' steps 10-15. Then enabled says whether there is a window, so a saved config reads
  // back as it ran.
  const auto file_of = [&](const std::string& key) {
    const std::string& o = c.origin(key);
    return o.substr(0, o.rfind(':'));
  };
  const std::string& switch_origin = c.origin("profiler.enabled");
  if (!t.profiler.enabled && switch_origin != "default" &&
      (switch_origin.rfind("override '", 0) == 0 || file_of("profiler.enabled") == file_of("profiler.start_step")))
    t.profiler.start_step = t.profiler.end_step = -1;
  if (t.profiler.enabled && t.profiler.start_step < 0 && t.profiler.end_step < 0)
    t.profiler.start_step = 10, t.profiler.end_step = 15;  // the recipes' defaults
  t.profiler.enabled = t.profiler.start_step >= 0;
  return t;
}

config::Config to_config(const TrainConfig& t) {
  config::Config c(train_config_schema());
  for (const auto& b : registry().bindings) c.set(b.key, b.get(t));
  return c;
}

void check_train_config(const TrainConfig& c) {
  std::vector<std::string> errs;
  auto err = [&](auto&&... parts) {
    std::ostringstream os;
    (os << ... << parts);
    errs.push_back(os.str());
  };
  // Ranges of single keys (the loaders check these already; a hand-built struct may not be;
  // this also checks the string-valued keys against their allowed values).
  for (const auto& p : to_config(c).check_ranges()) errs.push_back(p);

  const auto& m = c.model.config;
  if (m.num_attention_heads > 0 && m.hidden_size % m.num_attention_heads != 0) {
    err("model.config.hidden_size (", m.hidden_size,
        ") must be divisible by model.config.num_attention_heads (", m.num_attention_heads, ")");
  } else if (m.num_attention_heads > 0 && m.head_dim() % 2 != 0) {
    err("head dim model.config.hidden_size / model.config.num_attention_heads (", m.hidden_size,
        " / ", m.num_attention_heads, " = ", m.head_dim(), ") must be even for rotary embeddings");
  }
  if (m.num_key_value_heads > 0 && m.num_attention_heads % m.num_key_value_heads != 0) {
    err("model.config.num_attention_heads (", m.num_attention_heads,
        ") must be divisible by model.config.num_key_value_heads (", m.num_key_value_heads, ")");
  }
  // The family's own rules (models/<family>/family.cpp).
  const auto names = family_names();
  if (std::find(names.begin(), names.end(), c.model.family) != names.end())
    family_named(c.model.family).check_config(m, data_options(c), errs);
  // Which layer runs in which precision (fp8_layers / fp4_layers against the layers), as the run
  // will build it, so that --print-config shows only what runs. (With model.init_from the layers
  // are the directory's: adopt_init_from_architecture checks them.)
  if (c.model.init_from.empty() && m.num_hidden_layers > 0) {
    try {
      (void)layer_quant_for(c, c.device, m.num_hidden_layers);
    } catch (const Error& e) {
      errs.push_back(e.what());
    }
  }

  if (c.dataset.path.empty()) {
    err("dataset.path is empty: set it in the config or on the command line "
        "(dataset.path=FILE, a directory, a glob or a comma-separated list)");
  }
  if (c.dataset.packing == BatchMode::Thd &&
      c.dataset.max_tokens_per_batch < c.dataset.max_seq_length) {
    err("dataset.max_tokens_per_batch (", c.dataset.max_tokens_per_batch,
        ") must be at least dataset.max_seq_length (", c.dataset.max_seq_length,
        ") so that one sequence fits in a packed micro batch");
  }
  if (!c.dataset.weights.empty()) {
    const size_t entries = split_input_list(c.dataset.path).size();
    double total = 0;
    for (double w : c.dataset.weights) total += w;
    if (c.dataset.weights.size() != entries)
      err("dataset.weights has ", c.dataset.weights.size(), " weights but dataset.path lists ", entries,
          " entries (one weight per entry)");
    else if (!(total > 0))
      err("dataset.weights must not all be 0");
  }
  if (c.dataset.val_every_n_steps > 0 && c.dataset.val_path.empty()) {
    err("dataset.val_every_n_steps is ", c.dataset.val_every_n_steps,
        " but dataset.val_path is empty");
  }
  if (c.output_dir.empty()) err("output_dir is empty");
  for (const auto& [on, key] : {std::pair{c.fp8_config.quantized_model_init_kwargs.enabled,
                                          "fp8_config.quantized_model_init_kwargs.enabled"},
                                std::pair{c.fp8_config.fp8_model_init_kwargs.enabled,
                                          "fp8_config.fp8_model_init_kwargs.enabled"}})
    if (on)
      err(key, "=true (Transformer Engine's quantized_model_init: weights held only in FP8) is not supported: biofm "
               "keeps bf16/fp32 weights and quantizes them each step (fp8_config.enabled); set it to false");
  if (c.quant_stats_config.log_to_wandb)
    err("quant_stats_config.log_to_wandb=true: biofm has no Weights & Biases logger; the FP8 statistics go to "
        "metrics.jsonl and TensorBoard as fp8/... (tools/metrics_to_wandb.py makes an offline W&B run of them); "
        "set it to false");
  auto both_set = [&](const std::string& a, const std::string& b, const char* ka, const char* kb) {
    if (!a.empty() && !b.empty() && a != b)
      err(ka, " ('", a, "') and ", kb, " ('", b, "') are the same setting in two recipes' spellings; set one");
  };
  both_set(c.quant_stats_config.quant_stats_file, c.fp8_stats_config.fp8_stats_file,
           "quant_stats_config.quant_stats_file", "fp8_stats_config.fp8_stats_file");
  both_set(c.quant_stats_config.quant_log_dir, c.fp8_stats_config.fp8_log_dir, "quant_stats_config.quant_log_dir",
           "fp8_stats_config.fp8_log_dir");
  if (c.distributed.nccl_symmetric && (c.distributed.strategy == ParallelStrategy::Zero2 ||
                                       c.distributed.strategy == ParallelStrategy::Fsdp))
    err("distributed.nccl_symmetric=true applies to ddp and zero1 (their all-reduced gradient buffer); ",
        strategy_name(c.distributed.strategy), " reduces each layer's gradients into their owners' shards: set it to false");
  if (c.cp_size > 1 && c.device == Device::CUDA)
    err("cp_size=", c.cp_size, " with device=cuda: context parallelism runs on CPU processes only in this version "
        "(its GPU attention and NCCL groups are not built yet); use device=cpu or cp_size=1");
  if (c.cp_size > 1 && (c.fp8_config.enabled || c.fp4_config.enabled))
    err("cp_size=", c.cp_size, " with ", c.fp8_config.enabled ? "fp8_config" : "fp4_config",
        ".enabled=true: context parallelism does not yet share the quantization's amax over its group, so each "
        "rank would scale its part of a tensor on its own; train context-parallel in bf16/fp32 for now");
  if (c.profiler.range_times && c.profiler.start_step < 0)
    err("profiler.range_times=true times the steps of the profiler window: set profiler.start_step and "
        "profiler.end_step too");
  if ((c.profiler.start_step >= 0) != (c.profiler.end_step >= 0) || c.profiler.end_step < c.profiler.start_step)
    err("profiler.start_step (", c.profiler.start_step, ") and profiler.end_step (", c.profiler.end_step,
        ") must both be -1 or satisfy 0 <= start_step <= end_step");

  if (!errs.empty()) {
    if (errs.size() == 1) throw Error(errs[0]);
    std::string msg = "invalid training config: " + std::to_string(errs.size()) + " problems:";
    for (const auto& e : errs) msg += "\n  " + e;
    throw Error(msg);
  }
}

namespace {
// The recipes' config names that have no file here: what to run instead ("" if none known).
std::string recipe_config_hint(const std::string& name) {
  if (name == "L0_sanity")
    return "the recipes' L0_sanity is --config-name esm2_sanity (ESM-2) or llama3_sanity (Llama 3, OpenGenome2)";
  if (name == "L0_sanity_cp")
    return "the recipes' L0_sanity_cp is --config-name llama3_sanity cp_size=2 under biofm launch --nproc-per-node 2 "
           "(context parallelism runs on CPU processes for now, docs/DISTRIBUTED.md)";
  if (name == "L0_convergence") return "biofm's small convergence runs are esm2_sanity and llama3_sanity";
  if (name.rfind("L2_lingua", 0) == 0)
    return "the Lingua natural-language models are not supported (biofm has protein and nucleotide tokenizers)";
  if (name == "og2_7b_thd_gqa_global_shuffle")
    return "og2_7b reads its data through a shuffle buffer with dataset.streaming=true, or shuffled in memory";
  return "";
}
}  // namespace

TrainConfig load_train_config(const std::string& configs_dir, const std::string& name,
                              const std::vector<std::string>& overrides, std::vector<std::string>* notes,
                              std::set<std::string>* overridden) {
  config::Config c(train_config_schema());
  try {
    c = config::load(train_config_schema(), configs_dir, name, overrides);
  } catch (const Error& e) {
    const std::string hint = recipe_config_hint(name);
    if (hint.empty() || std::string(e.what()).find("not found") == std::string::npos) throw;
    throw Error(std::string(e.what()) + "; " + hint);
  }
  TrainConfig t = train_config_from(c);
  check_train_config(t);
  if (overridden)
    for (const config::KeySpec& k : train_config_schema().keys())
      if (c.origin(k.key).rfind("override '", 0) == 0) overridden->insert(k.key);
  if (notes) {
    *notes = c.notes();
    // (the recipes pass both batch sizes; under packing only the token budget applies)
    const std::string& mbs_origin = c.origin("dataset.micro_batch_size");
    if (t.dataset.packing == BatchMode::Thd && mbs_origin.rfind("override '", 0) == 0)
      notes->push_back("dataset.micro_batch_size=" + std::to_string(t.dataset.micro_batch_size) + " (" + mbs_origin +
                       ") is not used with dataset.packing=thd: each micro batch holds up to "
                       "dataset.max_tokens_per_batch=" + std::to_string(t.dataset.max_tokens_per_batch) + " tokens");
    // (as in Transformer Engine, FP8 attention belongs to the FP8 layers)
    if (!t.fp8_layers.empty() && !t.fp8_config.enabled)
      notes->push_back("fp8_layers has no effect without fp8_config.enabled=true: every layer runs in " +
                       std::string(precision_name(t.precision)));
    if (!t.fp4_layers.empty() && !t.fp4_config.enabled)
      notes->push_back("fp4_layers has no effect without fp4_config.enabled=true");
    if (t.fp8_config.fp8_recipe_kwargs.fp8_dpa && !t.fp8_config.enabled)
      notes->push_back("fp8_config.fp8_recipe_kwargs.fp8_dpa=true has no effect without fp8_config.enabled=true: "
                       "attention runs in FP8 only in the FP8 layers");
  }
  return t;
}

TrainConfig load_train_config_string(const std::string& yaml,
                                     const std::vector<std::string>& overrides,
                                     const std::string& configs_dir) {
  TrainConfig t =
      train_config_from(config::load_string(train_config_schema(), yaml, overrides, configs_dir));
  check_train_config(t);
  return t;
}

namespace {
std::string value_text(const config::Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return config::format_float(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v)) return s->empty() ? "''" : *s;
  std::string list;
  for (double d : std::get<std::vector<double>>(v)) list += (list.empty() ? "" : ",") + config::format_float(d);
  return "[" + list + "]";
}
}  // namespace

std::vector<std::string> config_lines(const TrainConfig& cfg) {
  const config::Config c = to_config(cfg);
  std::vector<std::string> out;
  for (const config::KeySpec& k : train_config_schema().keys()) out.push_back(k.key + "=" + value_text(c.get(k.key)));
  return out;
}

std::string adopt_init_from_architecture(TrainConfig& cfg, const std::set<std::string>& overridden) {
  const std::string& dir = cfg.model.init_from;
  if (dir.empty()) return "";
  const ModelFamily& family = family_named(cfg.model.family);
  const ModelFamily& held = family_of_dir(dir);
  if (&held != &family)
    fail("model.init_from '", dir, "' holds a ", held.name, " model but model.family is ", family.name);
  TrainConfig from_dir = cfg;
  family.read_shape(dir, from_dir.model.config);
  const config::Config a = to_config(cfg), b = to_config(from_dir);
  std::string given, unused;
  for (const config::KeySpec& k : train_config_schema().keys()) {
    if (k.key.rfind("model.config.", 0) != 0 || a.get(k.key) == b.get(k.key)) continue;
    std::string& list = overridden.count(k.key) ? given : unused;
    list += (list.empty() ? "" : ", ") + k.key + "=" + value_text(a.get(k.key)) + " (the directory's: " +
            value_text(b.get(k.key)) + ")";
  }
  if (!given.empty())
    fail("model.init_from=", dir, " loads a model with the architecture of its config.json, which the override(s) ",
         given, " contradict: drop them (a loaded model keeps its architecture)");
  cfg.model.config = from_dir.model.config;
  check_train_config(cfg);
  (void)layer_quant_for(cfg, cfg.device, cfg.model.config.num_hidden_layers);
  if (unused.empty()) return "";
  return "model.init_from: the model's architecture comes from " + dir + "/config.json; the config's " + unused +
         (unused.find(", ") == std::string::npos ? " is" : " are") + " not used";
}

std::string to_yaml(const TrainConfig& cfg, const std::string& header) {
  return to_config(cfg).to_yaml(header);
}

}  // namespace biofm
