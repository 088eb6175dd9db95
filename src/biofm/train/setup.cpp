#include "biofm/train/setup.h"

#include "biofm/data/blend.h"
#include "biofm/data/input_files.h"
#include "biofm/data/prepared.h"

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
  o.gemm_fused_bgrad = cfg.ops.gemm_fused_bgrad;
  o.gemm_inplace_splitk = cfg.ops.gemm_inplace_splitk;
  ops::set_op_options(o);
}

std::optional<ops::Fp8Recipe> fp8_recipe_for(const TrainConfig& cfg, Device device) {
  if (!cfg.fp8_config.enabled) return std::nullopt;
  if (device == Device::CUDA && precision_for(cfg, device) == Precision::F32)
    fail("fp8_config.enabled needs precision bf16-mixed or bf16 on CUDA (FP8 GEMMs read bf16 activations), "
         "got precision ", precision_name(cfg.precision));
  if (cfg.fp8_config.fp8_recipe != "Float8CurrentScaling")
    fail("fp8_config.fp8_recipe '", cfg.fp8_config.fp8_recipe, "' is not supported (Float8CurrentScaling)");
  ops::Fp8Recipe r;
  if (cfg.fp8_config.fp8_format == "E4M3")
    r.bwd = ops::Fp8Type::E4M3;
  else if (cfg.fp8_config.fp8_format != "HYBRID")
    fail("fp8_config.fp8_format '", cfg.fp8_config.fp8_format, "' is not one of HYBRID, E4M3");
  return r;
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

std::unique_ptr<LanguageModel> make_model(const TrainConfig& cfg, Device device) {
  const std::optional<ops::Fp8Recipe> fp8 = fp8_recipe_for(cfg, device);  // (a bad setting fails before the build)
  const ModelFamily& family = family_named(cfg.model.family);
  BuildOptions o;
  o.precision = precision_for(cfg, device);
  o.seed = uint64_t(cfg.seed);
  o.no_decay_on_1d_and_embeddings = cfg.optimizer.no_decay_on_1d_and_embeddings;
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
  m->set_fp8(fp8);
  return m;
}

namespace {

// One entry of dataset.path / val_path: a prepared directory or files read into memory.
std::unique_ptr<SequenceCorpus> load_one(const TrainConfig& cfg, const std::string& spec, const std::string& split) {
  if (is_prepared_dir(spec)) {
    PreparedOpenOptions po;
    po.split = split;
    po.verify_checksums = cfg.dataset.verify_checksums;
    po.verify_in_background = true;  // training starts at once; a bad CRC fails the next read
    auto c = std::make_unique<PreparedCorpus>(spec, po);
    const std::string want = tokenizer_name(family_named(cfg.model.family).tokenizer());
    if (c->tokenizer() != want)
      fail("prepared dataset ", spec, " was tokenized with the ", c->tokenizer(), " tokenizer, but model.family ",
           cfg.model.family, " uses ", want, " (run biofm prepare --family ", cfg.model.family, ")");
    return c;
  }
  ReaderOptions ro;
  ro.format = cfg.dataset.format;
  ro.column = cfg.dataset.column;
  ro.skip_malformed = cfg.dataset.on_error == "skip";
  return std::make_unique<SequenceDataset>(SequenceDataset::load(spec, ro));
}

}  // namespace

std::unique_ptr<SequenceCorpus> load_corpus(const TrainConfig& cfg, bool val) {
  const std::string& spec = val ? cfg.dataset.val_path : cfg.dataset.path;
  const std::string& split = val ? cfg.dataset.val_split : cfg.dataset.split;
  const std::vector<std::string> entries = split_input_list(spec);
  if (!val && !cfg.dataset.weights.empty()) {
    if (entries.size() != cfg.dataset.weights.size())
      fail("dataset.weights has ", cfg.dataset.weights.size(), " weights for ", entries.size(), " dataset.path entries");
    std::vector<std::unique_ptr<SequenceCorpus>> sources;
    for (const auto& e : entries) sources.push_back(load_one(cfg, e, split));
    return std::make_unique<BlendCorpus>(std::move(sources), cfg.dataset.weights, entries, uint64_t(cfg.seed));
  }
  if (entries.size() > 1)
    for (const auto& e : entries)
      if (is_prepared_dir(e))
        fail("dataset path '", spec, "': the prepared dataset ", e,
             " can only be given alone, or blended with the others through dataset.weights");
  return load_one(cfg, spec, split);
}

std::unique_ptr<BatchSource> make_batch_source(const TrainConfig& cfg, const SequenceCorpus& data) {
  return family_named(cfg.model.family).batches(data_options(cfg), data);
}

}  // namespace biofm
