// The ESM-2 entry of the model registry: masked LM on protein sequences.
#include "biofm/models/esm2/model.h"
#include "biofm/models/hf_dir.h"
#include "biofm/models/registry.h"

namespace biofm {

namespace {

void check_config(const ModelShape& m, const DataOptions& d, std::vector<std::string>& errs) {
  if (m.num_key_value_heads != 0 && m.num_key_value_heads != m.num_attention_heads)
    config_error(errs, "model.config.num_key_value_heads (", m.num_key_value_heads,
        ") must be 0 or equal to model.config.num_attention_heads for model.family esm2 "
        "(ESM-2 has no grouped-query attention)");
  if (m.hidden_act != "gelu")
    config_error(errs, "model.config.hidden_act '", m.hidden_act, "' does not fit model.family esm2 (ESM-2 uses gelu)");
  if (!m.tie_word_embeddings)
    config_error(errs, "model.config.tie_word_embeddings must be true for model.family esm2 "
              "(the ESM-2 LM head decodes with the word embeddings)");
  if (!m.rope_scaling_type.empty())
    config_error(errs, "model.config.rope_scaling_type '", m.rope_scaling_type, "' applies to model.family llama only");
  if (!(d.mlm_probability > 0 && d.mlm_probability < 1))
    config_error(errs, "dataset.mlm_probability (", d.mlm_probability, ") must be in (0, 1) for masked LM training");
}

std::unique_ptr<LanguageModel> build(const ModelShape& m, Device device, const BuildOptions& o) {
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
  auto model = std::make_unique<Esm2Model>(c, device, o.precision, o.shard);
  model->params().init(o.seed);
  return model;
}

std::unique_ptr<LanguageModel> load(const std::string& dir, Device device, const BuildOptions& o) {
  return Esm2Model::from_hf_dir(dir, device, o.precision, o.seed, o.shard);
}

void read_shape(const std::string& dir, ModelShape& m) {
  const HfDirContents hf = read_hf_dir(dir);
  const Esm2Config c = esm2_config_from_hf_json(hf.config_json, hf.config_path);
  m.vocab_size = c.vocab_size;
  m.hidden_size = c.hidden_size;
  m.num_hidden_layers = c.num_hidden_layers;
  m.num_attention_heads = c.num_attention_heads;
  m.intermediate_size = c.intermediate_size;
  m.max_position_embeddings = c.max_position_embeddings;
  // (read as a float: a config's 1e-05 is the same value as the file's)
  if (float(m.layer_norm_eps) != c.layer_norm_eps) m.layer_norm_eps = c.layer_norm_eps;
  m.token_dropout = c.token_dropout;
}

const Tokenizer& tokenizer() { return esm_tokenizer(); }

std::unique_ptr<BatchSource> batches(const DataOptions& o, const SequenceCorpus& data) {
  return make_mlm_source(o, data, esm_tokenizer());
}

}  // namespace

const ModelFamily& esm2_family() {
  static const ModelFamily f{.name = "esm2",
                             .hf_model_type = "esm",
                             .objective = Objective::MaskedLM,
                             .embed = true,
                             .eval = true,
                             .generate = false,
                             .check_config = check_config,
                             .build = build,
                             .load = load,
                             .read_shape = read_shape,
                             .tokenizer = tokenizer,
                             .batches = batches};
  return f;
}

}  // namespace biofm
