#include "biofm/train/setup.h"

#include <algorithm>

#include "biofm/core/notes.h"
#include "biofm/data/alphabet.h"
#include "biofm/data/blend.h"
#include "biofm/data/input_files.h"
#include "biofm/data/prepared.h"
#include "biofm/data/stream.h"

namespace biofm {

Device device_of(const TrainConfig& cfg) { return cfg.device; }

Precision precision_for(const TrainConfig& cfg, Device device) {
  return device == Device::CPU ? Precision::F32 : cfg.precision;
}

void apply_op_options(const TrainConfig& cfg) {
  ops::OpOptions o;
  o.attention = cfg.ops.attention;
  o.attention_verbose = cfg.ops.attention_verbose;
  o.attention_check = cfg.ops.attention_check;
  o.sdpa_autotune = cfg.ops.sdpa_autotune;
  o.sdpa_dense = cfg.ops.sdpa_dense;
  o.attention_packed_qkv = cfg.ops.attention_packed_qkv;
  o.gemm_fused_bgrad = cfg.ops.gemm_fused_bgrad;
  o.gemm_inplace_splitk = cfg.ops.gemm_inplace_splitk;
  o.gemm_fused_gelu = cfg.ops.gemm_fused_gelu;
  o.gemm_autotune = cfg.ops.gemm_autotune;
  o.wgrad_stream = cfg.ops.wgrad_stream;
  o.fp8_release_inputs = cfg.ops.fp8_release_inputs;
  o.fp8_gelu_codes = cfg.ops.fp8_gelu_codes;
  o.fp8_norm_codes = cfg.ops.fp8_norm_codes;
  o.fp8_weights_ahead = cfg.ops.fp8_weights_ahead;
  ops::set_op_options(o);
}

namespace {

// "transformer_engine.common.recipe.DelayedScaling" -> "DelayedScaling"
std::string recipe_short_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

std::string describe_precision(const TrainConfig& cfg, Device device) {
  const Precision runs = precision_for(cfg, device);
  std::string s = precision_name(runs);
  // (the CPU backend computes in fp32 whatever the config asks: say so when it asked otherwise)
  if (runs != cfg.precision) s += std::string("; precision=") + precision_name(cfg.precision) + " is for CUDA";
  // The quantized formats by name; MXFP8 and NVFP4 are emulated everywhere (no Hopper kernels),
  // the per-tensor and 128-block FP8 recipes on the CPU only.
  const char* nvfp4 = ", NVFP4 (E2M1 with E4M3 block scales) emulated";
  const std::string recipe = recipe_short_name(cfg.fp8_config.fp8_recipe);
  if (cfg.fp8_config.enabled) {
    if (recipe == "NVFP4BlockScaling")  // (fp8_recipe NVFP4BlockScaling: the fp8 layers run NVFP4)
      s += nvfp4;
    else if (recipe == "MXFP8BlockScaling")
      s += ", MXFP8 " + cfg.fp8_config.fp8_format + " (E8M0 block scales) emulated";
    else
      s += ", FP8 " + cfg.fp8_config.fp8_format + (device == Device::CPU ? " emulated" : "");
  }
  if (cfg.fp4_config.enabled && !(cfg.fp8_config.enabled && recipe == "NVFP4BlockScaling")) s += nvfp4;
  return s;
}

namespace {

// A fp8_recipe_kwargs key set away from its default for a recipe that does not have it.
void check_kwargs(const TrainConfig& cfg, const std::string& recipe) {
  const TrainConfig::Fp8::Kwargs& k = cfg.fp8_config.fp8_recipe_kwargs;
  const TrainConfig::Fp8::Kwargs d{};
  auto only_for = [&](bool changed, const char* key, std::initializer_list<const char*> recipes) {
    if (!changed) return;
    for (const char* r : recipes)
      if (recipe == r) return;
    std::string names;
    for (const char* r : recipes) names += std::string(names.empty() ? "" : ", ") + r;
    fail("fp8_config.fp8_recipe_kwargs.", key, " is a parameter of ", names, ", not of fp8_config.fp8_recipe ", recipe);
  };
  only_for(k.amax_history_len != d.amax_history_len, "amax_history_len", {"DelayedScaling"});
  only_for(k.amax_compute_algo != d.amax_compute_algo, "amax_compute_algo", {"DelayedScaling"});
  only_for(k.margin != d.margin, "margin", {"DelayedScaling", "MXFP8BlockScaling"});
  only_for(k.reduce_amax != d.reduce_amax, "reduce_amax", {"DelayedScaling"});
  only_for(k.use_f32_scales != d.use_f32_scales, "use_f32_scales", {"Float8BlockScaling"});
  if (k.fp8_mha)
    fail("fp8_config.fp8_recipe_kwargs.fp8_mha=true (FP8 attention with FP8 inputs and outputs of the whole "
         "attention block) is not implemented; fp8_dpa=true runs the attention itself in FP8 (docs/PRECISION.md)");
  if (k.fp8_dpa && recipe != "DelayedScaling" && recipe != "Float8CurrentScaling")
    fail("fp8_config.fp8_recipe_kwargs.fp8_dpa=true takes a per-tensor recipe (DelayedScaling or "
         "Float8CurrentScaling), as Transformer Engine's FP8 attention does; fp8_config.fp8_recipe is ", recipe);
}

}  // namespace

std::optional<ops::Fp8Recipe> fp8_recipe_for(const TrainConfig& cfg, Device device) {
  if (!cfg.fp8_config.enabled) return std::nullopt;
  if (device == Device::CUDA && precision_for(cfg, device) == Precision::F32)
    fail("fp8_config.enabled needs precision bf16-mixed or bf16 on CUDA (FP8 GEMMs read bf16 activations), "
         "got precision ", precision_name(cfg.precision));
  ops::Fp8Recipe r;
  if (cfg.fp8_config.fp8_format == "E4M3")
    r.bwd = ops::Fp8Type::E4M3;
  else if (cfg.fp8_config.fp8_format != "HYBRID")
    fail("fp8_config.fp8_format '", cfg.fp8_config.fp8_format, "' is not one of HYBRID, E4M3");
  return r;
}

std::vector<ops::LayerQuant> layer_quant_for(const TrainConfig& cfg, Device device, int layers) {
  const auto& f8 = cfg.fp8_config;
  const auto& f4 = cfg.fp4_config;
  const std::string recipe = recipe_short_name(f8.fp8_recipe);
  // fp8_recipe NVFP4BlockScaling: the fp8 layers run NVFP4 (Transformer Engine takes the recipe as given).
  const bool fp8_is_fp4 = recipe == "NVFP4BlockScaling";
  if (f8.enabled) check_kwargs(cfg, recipe);
  const std::optional<ops::Fp8Recipe> types = fp8_recipe_for(cfg, device);
  if (f4.enabled && device == Device::CUDA && precision_for(cfg, device) == Precision::F32)
    fail("fp4_config.enabled needs precision bf16-mixed or bf16 on CUDA, got ", precision_name(cfg.precision));
  const std::vector<ops::LayerFormat> formats =
      ops::assign_layer_formats(layers, f8.enabled, cfg.fp8_layers, f4.enabled, cfg.fp4_layers);
  ops::LayerQuant fp8q, fp4q;
  fp8q.format = ops::LayerFormat::Fp8;
  if (types) {
    fp8q.fwd = types->fwd;
    fp8q.bwd = types->bwd;
  }
  if (recipe == "DelayedScaling") fp8q.scaling = ops::Fp8Scaling::Delayed;
  if (recipe == "Float8BlockScaling") fp8q.scaling = ops::Fp8Scaling::Block;
  if (recipe == "MXFP8BlockScaling") fp8q.scaling = ops::Fp8Scaling::Mxfp8;
  fp8q.delayed.amax_history_len = int(f8.fp8_recipe_kwargs.amax_history_len);
  fp8q.delayed.amax_compute_max = f8.fp8_recipe_kwargs.amax_compute_algo == "max";
  fp8q.delayed.margin = int(f8.fp8_recipe_kwargs.margin);
  fp8q.block_f32_scales = f8.fp8_recipe_kwargs.use_f32_scales;
  fp8q.fp8_dpa = f8.fp8_recipe_kwargs.fp8_dpa;
  fp4q.format = ops::LayerFormat::Fp4;
  fp4q.nvfp4.random_hadamard = !f4.fp4_recipe_kwargs.disable_rht;
  fp4q.nvfp4.stochastic_rounding = !f4.fp4_recipe_kwargs.disable_stochastic_rounding;
  fp4q.nvfp4.weight_2d = !f4.fp4_recipe_kwargs.disable_2d_quantization;
  if (fp8_is_fp4) fp8q = fp4q;

  std::vector<ops::LayerQuant> out;
  if (!f8.enabled && !f4.enabled) return out;
  for (ops::LayerFormat f : formats)
    out.push_back(f == ops::LayerFormat::Fp8 ? fp8q : f == ops::LayerFormat::Fp4 ? fp4q : ops::LayerQuant{});
  // On CUDA, MXFP8 and NVFP4 run emulated (quantize-dequantize, bf16 GEMMs: the numerics, not
  // the speed; they need Blackwell); the trainer's banner says so.
  return out;
}

DataOptions data_options(const TrainConfig& cfg) {
  const auto& d = cfg.dataset;
  DataOptions o;
  o.seed = uint64_t(cfg.seed);
  o.max_seq_length = d.max_seq_length;
  o.mlm_probability = d.mlm_probability;
  o.mode = d.packing;
  o.max_tokens_per_batch = d.max_tokens_per_batch;
  o.micro_batch_size = d.micro_batch_size;
  o.pad_to_multiple_of = d.pad_to_multiple_of;
  o.shuffle = d.shuffle;
  o.stride = d.stride;
  o.uppercase_labels = d.uppercase_labels;
  return o;
}

std::unique_ptr<LanguageModel> make_model(const TrainConfig& cfg, Device device, ParamShard shard) {
  // (a bad setting fails before the build; the layer count is checked against the model after)
  int most = 1;
  for (const auto* list : {&cfg.fp8_layers, &cfg.fp4_layers})
    for (double v : *list)
      if (v >= 1 && v <= 1e6) most = std::max(most, int(v));  // (others fail in layer_quant_for below)
  (void)layer_quant_for(cfg, device, most);
  const ModelFamily& family = family_named(cfg.model.family);
  BuildOptions o;
  o.precision = precision_for(cfg, device);
  o.seed = uint64_t(cfg.seed);
  o.no_decay_on_1d_and_embeddings = cfg.optimizer.no_decay_on_1d_and_embeddings;
  o.shard = shard;
  std::unique_ptr<LanguageModel> m;
  if (!cfg.model.init_from.empty()) {
    const ModelFamily& held = family_of_dir(cfg.model.init_from);
    if (&held != &family)
      fail("model.init_from '", cfg.model.init_from, "' holds a ", held.name, " model but model.family is ",
           family.name);
    m = family.load(cfg.model.init_from, device, o);
  } else {
    m = family.build(cfg.model.config, device, o);
  }
  m->set_recompute(cfg.recompute, cfg.recompute_layers);
  m->set_layer_quant(layer_quant_for(cfg, device, int(m->dims().layers)));
  return m;
}

namespace {

// One entry of dataset.path / val_path: a prepared directory, files read into memory or, with
// `stream`, files streamed; `notes`: see load_corpus.
std::unique_ptr<SequenceCorpus> load_one(const TrainConfig& cfg, const std::string& spec, const std::string& split,
                                         bool notes, bool stream = false) {
  const ModelFamily& family = family_named(cfg.model.family);
  if (is_prepared_dir(spec)) {
    PreparedOpenOptions po;
    po.split = split;
    po.verify_checksums = cfg.dataset.verify_checksums;
    po.verify_in_background = true;  // training starts at once; a bad CRC fails the next read
    po.cluster_sampling = cfg.dataset.cluster_sampling;
    po.seed = uint64_t(cfg.seed);
    auto c = std::make_unique<PreparedCorpus>(spec, po);
    require_prepared_tokenizer(*c, spec, family.tokenizer(), "model.family " + cfg.model.family);
    return c;
  }
  ReaderOptions ro;
  ro.format = cfg.dataset.format;
  ro.column = cfg.dataset.column;
  ro.skip_malformed = cfg.dataset.on_error == "skip";
  if (stream) {
    StreamOptions so = stream_options(data_options(cfg), family.objective == Objective::CausalLM,
                                      uint64_t(cfg.dataset.shuffle_buffer), ro);
    if (notes) so.alphabet = training_alphabet(family.tokenizer());
    return std::make_unique<StreamingCorpus>(spec, so);
  }
  auto data = std::make_unique<SequenceDataset>(SequenceDataset::load(spec, ro));
  if (notes) {
    ResidueTally outside = training_alphabet(family.tokenizer());
    for (uint64_t i = 0; i < data->size(); ++i) outside.add(data->sequence(i));
    if (outside.residues) note(spec + ": " + outside.text());
  }
  return data;
}

}  // namespace

std::unique_ptr<SequenceCorpus> load_corpus(const TrainConfig& cfg, bool val, bool notes) {
  const std::string& spec = val ? cfg.dataset.val_path : cfg.dataset.path;
  const std::string& split = val ? cfg.dataset.val_split : cfg.dataset.split;
  const std::vector<std::string> entries = split_input_list(spec);
  const bool stream = !val && cfg.dataset.streaming;
  if (stream && !cfg.dataset.weights.empty())
    fail("dataset.streaming does not take a blend (dataset.weights): blend sources are sampled at random, "
         "so prepare them (biofm prepare) and blend the prepared directories");
  if (!val && !cfg.dataset.weights.empty()) {
    if (entries.size() != cfg.dataset.weights.size())
      fail("dataset.weights has ", cfg.dataset.weights.size(), " weights for ", entries.size(), " dataset.path entries");
    std::vector<std::unique_ptr<SequenceCorpus>> sources;
    for (const auto& e : entries) sources.push_back(load_one(cfg, e, split, notes));
    return std::make_unique<BlendCorpus>(std::move(sources), cfg.dataset.weights, entries, uint64_t(cfg.seed));
  }
  if (entries.size() > 1)
    for (const auto& e : entries)
      if (is_prepared_dir(e))
        fail("dataset path '", spec, "': the prepared dataset ", e,
             " can only be given alone, or blended with the others through dataset.weights");
  return load_one(cfg, spec, split, notes, stream);  // (a prepared directory is mapped, streaming or not)
}

std::unique_ptr<BatchSource> make_batch_source(const TrainConfig& cfg, const SequenceCorpus& data) {
  return family_named(cfg.model.family).batches(data_options(cfg), data);
}

}  // namespace biofm
