// The Llama entry of the model registry: causal LM on DNA (the OpenGenome2 recipe).
#include "biofm/models/hf_dir.h"
#include "biofm/models/llama/model.h"
#include "biofm/models/registry.h"

namespace biofm {

namespace {

void check_config(const ModelShape& m, const DataOptions& d, std::vector<std::string>& errs) {
  if (m.hidden_act != "silu")
    config_error(errs, "model.config.hidden_act '", m.hidden_act,
        "' does not fit model.family llama (Llama uses silu); set model.config.hidden_act: silu");
  if (m.rope_scaling_type == "llama3" && !(m.high_freq_factor > m.low_freq_factor))
    config_error(errs, "model.config.high_freq_factor (", m.high_freq_factor, ") must be greater than model.config.low_freq_factor (",
        m.low_freq_factor, ") for llama3 rope scaling");
  if (d.stride >= d.max_seq_length - 2)  // (each window holds max_seq_length - 2 bases, <BOS> and <EOS> aside)
    config_error(errs, "dataset.stride (", d.stride, ") must lie in [0, dataset.max_seq_length - 2 = ",
                 d.max_seq_length - 2, "): consecutive windows must share fewer bases than a window holds");
}

std::unique_ptr<LanguageModel> build(const ModelShape& m, Device device, const BuildOptions& o) {
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
  auto model = std::make_unique<LlamaModel>(c, device, o.precision, o.no_decay_on_1d_and_embeddings, o.shard);
  model->params().init(o.seed);
  return model;
}

std::unique_ptr<LanguageModel> load(const std::string& dir, Device device, const BuildOptions& o) {
  return LlamaModel::from_hf_dir(dir, device, o.precision, o.no_decay_on_1d_and_embeddings, o.seed, o.shard);
}

void read_shape(const std::string& dir, ModelShape& m) {
  const HfDirContents hf = read_hf_dir(dir);
  const LlamaConfig c = llama_config_from_hf_json(hf.config_json, hf.config_path);
  m.vocab_size = c.vocab_size;
  m.hidden_size = c.hidden_size;
  m.intermediate_size = c.intermediate_size;
  m.num_hidden_layers = c.num_hidden_layers;
  m.num_attention_heads = c.num_attention_heads;
  if (m.kv_heads() != c.num_key_value_heads) m.num_key_value_heads = c.num_key_value_heads;  // (0 means "as many")
  m.max_position_embeddings = c.max_position_embeddings;
  m.rms_norm_eps = c.rms_norm_eps;
  m.rope_theta = c.rope_theta;
  m.rope_scaling_type = c.rope_type == "default" ? "" : c.rope_type;
  if (!m.rope_scaling_type.empty()) {  // (the scaling keys mean nothing without scaling)
    m.rope_scaling_factor = c.rope_factor;
    m.low_freq_factor = c.low_freq_factor;
    m.high_freq_factor = c.high_freq_factor;
    m.original_max_position_embeddings = c.original_max_position_embeddings;
  }
  m.tie_word_embeddings = c.tie_word_embeddings;
}

const Tokenizer& tokenizer() { return nucleotide_tokenizer(); }

std::unique_ptr<BatchSource> batches(const DataOptions& o, const SequenceCorpus& data) {
  return make_causal_source(o, data, nucleotide_tokenizer());
}

}  // namespace

const ModelFamily& llama_family() {
  static const ModelFamily f{.name = "llama",
                             .hf_model_type = "llama",
                             .objective = Objective::CausalLM,
                             .embed = true,
                             .eval = true,
                             .generate = true,
                             .check_config = check_config,
                             .build = build,
                             .load = load,
                             .read_shape = read_shape,
                             .tokenizer = tokenizer,
                             .batches = batches};
  return f;
}

}  // namespace biofm
