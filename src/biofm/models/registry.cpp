#include "biofm/models/registry.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/io/atomic_file.h"
#include "biofm/models/esm2/model.h"
#include "biofm/models/llama/model.h"

namespace biofm {

Precision precision_for(const TrainConfig& cfg, Device device) {
  if (device == Device::CPU || cfg.precision == "fp32") return Precision::F32;
  if (cfg.precision == "bf16-mixed") return Precision::Bf16Mixed;
  if (cfg.precision == "bf16") return Precision::Bf16;
  fail("precision '", cfg.precision, "' is not one of fp32, bf16-mixed, bf16");
}

std::string model_type_of_dir(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path))
    fail("'", dir, "' is not a Hugging Face model directory: no config.json");
  try {
    auto j = nlohmann::json::parse(read_file(path));
    return j.value("model_type", "");
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

std::unique_ptr<LanguageModel> load_model_dir(const std::string& dir, Device device, Precision precision) {
  const std::string type = model_type_of_dir(dir);
  if (type == "esm") return Esm2Model::from_hf_dir(dir, device, precision);
  if (type == "llama") return LlamaModel::from_hf_dir(dir, device, precision);
  fail("'", dir, "': model_type '", type, "' is not supported (supported: esm, llama)");
}

namespace {

// The model of a training config: imported (model.init_from) or built and initialised.
std::unique_ptr<LanguageModel> build_model(const TrainConfig& cfg, Device device) {
  const Precision p = precision_for(cfg, device);
  if (!cfg.model.init_from.empty()) {
    // Llama: the OpenGenome2 weight-decay grouping is fixed when the parameter table is built.
    std::unique_ptr<LanguageModel> m;
    if (cfg.model.family == "llama" && model_type_of_dir(cfg.model.init_from) == "llama")
      m = LlamaModel::from_hf_dir(cfg.model.init_from, device, p, cfg.optimizer.no_decay_on_1d_and_embeddings);
    else
      m = load_model_dir(cfg.model.init_from, device, p);
    if (m->family() != cfg.model.family)
      fail("model.init_from '", cfg.model.init_from, "' holds a ", m->family(), " model but model.family is ",
           cfg.model.family);
    return m;
  }
  if (cfg.model.family == "esm2") {
    const auto& m = cfg.model.config;
    Esm2Config c;
    c.vocab_size = m.vocab_size;
    c.hidden_size = m.hidden_size;
    c.num_hidden_layers = m.num_hidden_layers;
    c.num_attention_heads = m.num_attention_heads;
    c.intermediate_size = m.intermediate_size;
    c.max_position_embeddings = m.max_position_embeddings;
    c.layer_norm_eps = float(m.layer_norm_eps);
    c.initializer_range = float(m.initializer_range);
    c.token_dropout = m.token_dropout;
    auto model = std::make_unique<Esm2Model>(c, device, p);
    model->params().init(uint64_t(cfg.seed));
    return model;
  }
  if (cfg.model.family == "llama") {
    const auto& m = cfg.model.config;
    LlamaConfig c;
    c.vocab_size = m.vocab_size;
    c.hidden_size = m.hidden_size;
    c.intermediate_size = m.intermediate_size;
    c.num_hidden_layers = m.num_hidden_layers;
    c.num_attention_heads = m.num_attention_heads;
    c.num_key_value_heads = m.kv_heads();
    c.head_dim = 0;  // hidden_size / num_attention_heads
    c.max_position_embeddings = m.max_position_embeddings;
    c.rms_norm_eps = m.rms_norm_eps;
    c.rope_theta = m.rope_theta;
    c.rope_type = m.rope_scaling_type.empty() ? "default" : m.rope_scaling_type;
    c.rope_factor = m.rope_scaling_factor;
    c.low_freq_factor = m.low_freq_factor;
    c.high_freq_factor = m.high_freq_factor;
    c.original_max_position_embeddings = m.original_max_position_embeddings;
    c.tie_word_embeddings = m.tie_word_embeddings;
    c.initializer_range = m.initializer_range;
    c.embedding_init_std = m.embedding_init_std;
    c.scaled_init = m.scaled_init;
    auto model = std::make_unique<LlamaModel>(c, device, p, cfg.optimizer.no_decay_on_1d_and_embeddings);
    model->params().init(uint64_t(cfg.seed));
    return model;
  }
  fail("unknown model.family '", cfg.model.family, "' (supported: esm2, llama)");
}

}  // namespace

std::optional<ops::Fp8Recipe> fp8_recipe_for(const TrainConfig& cfg, Device device) {
  if (!cfg.fp8_config.enabled) return std::nullopt;
  if (device == Device::CUDA && precision_for(cfg, device) == Precision::F32)
    fail("fp8_config.enabled needs precision bf16-mixed or bf16 on CUDA (FP8 GEMMs read bf16 activations), "
         "got precision ", cfg.precision);
  if (cfg.fp8_config.fp8_recipe != "Float8CurrentScaling")
    fail("fp8_config.fp8_recipe '", cfg.fp8_config.fp8_recipe, "' is not supported (Float8CurrentScaling)");
  ops::Fp8Recipe r;
  if (cfg.fp8_config.fp8_format == "E4M3")
    r.bwd = ops::Fp8Type::E4M3;
  else if (cfg.fp8_config.fp8_format != "HYBRID")
    fail("fp8_config.fp8_format '", cfg.fp8_config.fp8_format, "' is not one of HYBRID, E4M3");
  return r;
}

std::unique_ptr<LanguageModel> make_model(const TrainConfig& cfg, Device device) {
  const std::optional<ops::Fp8Recipe> fp8 = fp8_recipe_for(cfg, device);  // (a bad setting fails before the build)
  std::unique_ptr<LanguageModel> m = build_model(cfg, device);
  m->set_recompute(cfg.recompute, cfg.recompute_layers);
  m->set_fp8(fp8);
  return m;
}

}  // namespace biofm
