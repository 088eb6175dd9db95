// Llama 3 against Hugging Face LlamaForCausalLM: fixtures made by tools/make_hf_fixtures.py
// (tiny random models; llama_tiny: untied, GQA 4 heads / 2 kv heads, head_dim 16, llama3 rope
// scaling with all three remap branches; llama_tied: tied embeddings, plain rope). Batches of
// DNA byte ids with padding; logits, loss, final hidden states and every gradient in fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"
#include "hf_fixture.h"
#include "biofm/models/llama/config.h"
#include "biofm/models/llama/model.h"
#include "biofm/models/llama/tokenizer_files.h"
#include "biofm/models/registry.h"
#include "biofm/train/setup.h"
#include "biofm/train/config.h"

using namespace biofm;

namespace {

std::string fixture_dir(const std::string& name) {
  return std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/" + name;
}

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  double m = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
    m = std::max(m, double(std::fabs(a.f32()[i] - b.f32()[i])));
  return m;
}

// Worst difference over the real tokens between our rows [T,C] and the reference [B,S,C].
double worst_rows(const Tensor& ours, const Tensor& ref, const Tensor& mask, const std::vector<int64_t>& row_of) {
  const int64_t C = ref.size(2);
  double worst = 0;
  for (size_t i = 0; i < row_of.size(); ++i) {
    if (row_of[i] < 0 || !mask.i32()[i]) continue;
    for (int64_t c = 0; c < C; ++c)
      worst = std::max(worst, double(std::fabs(ours.f32()[row_of[i] * C + c] - ref.f32()[int64_t(i) * C + c])));
  }
  return worst;
}

// recompute_layers: 0 none, -1 all, k the first k layers.
void check_case(const std::string& name, bool packed, int recompute_layers = 0) {
  const bool recompute = recompute_layers != 0;
  SCOPED_TRACE(name + (packed ? " (packed THD)" : " (padded BSHD)") +
               (recompute ? " recompute " + std::to_string(recompute_layers) : ""));
  auto model_ptr = LlamaModel::from_hf_dir(fixture_dir(name), Device::CPU);
  LlamaModel& model = *model_ptr;
  model.set_recompute(recompute, recompute_layers);
  SafetensorsFile ref = read_safetensors(fixture_dir(name) + "/reference.safetensors");
  std::vector<int64_t> row_of;
  Batch batch = testkit::hf_fixture_batch(ref, packed, /*shift_labels=*/true, row_of);
  const Tensor& mask = ref.get("attention_mask");

  const double d_logits = worst_rows(model.logits(batch), ref.get("logits"), mask, row_of);
  EXPECT_LT(d_logits, 1e-4) << "max |logits - HF|";
  const double d_hidden = worst_rows(model.hidden_states(batch), ref.get("last_hidden_state"), mask, row_of);
  EXPECT_LT(d_hidden, 1e-4) << "max |hidden - HF|";

  // Loss (mean over labelled tokens) and the gradients of that mean.
  model.params().zero_grad();
  Tensor loss_acc = Tensor::zeros({1}, DType::F32);
  model.forward_backward(batch, 1.0f / float(batch.num_label_tokens), loss_acc);
  const double loss = double(loss_acc.f32()[0]) / double(batch.num_label_tokens);
  const double d_loss = std::fabs(loss - ref.get("loss").f32()[0]);
  EXPECT_LT(d_loss, 1e-4) << "loss " << loss << " vs HF " << ref.get("loss").f32()[0];
  // evaluate() and token_losses() agree with the training loss.
  LossSums s = model.evaluate(batch, true);
  EXPECT_EQ(s.num_tokens, batch.num_label_tokens);
  EXPECT_NEAR(s.loss_sum / double(s.num_tokens), loss, 1e-5);

  double worst_grad = 0;
  size_t checked = 0;
  for (size_t p = 0; p < model.params().size(); ++p) {
    const std::string& pname = model.params().spec(p).name;
    const Tensor& g_ref = ref.get("grad." + pname);
    Tensor g = model.params().grad(p);
    ASSERT_EQ(g.shape(), g_ref.shape()) << pname;
    const double rel = max_diff(g, g_ref) / std::max(testkit::max_abs(g_ref), 1e-6);
    worst_grad = std::max(worst_grad, rel);
    EXPECT_LE(rel, 1e-3) << "gradient of " << pname;
    ++checked;
  }
  // Every HF gradient has a parameter here (nothing silently skipped).
  size_t ref_grads = 0;
  for (auto& [k, t] : ref.tensors) ref_grads += k.rfind("grad.", 0) == 0;
  EXPECT_EQ(checked, ref_grads);
  std::printf("[parity %s %s%s] max|dlogits| %.2e  max|dhidden| %.2e  |dloss| %.2e  worst grad rel %.2e\n",
              name.c_str(), packed ? "thd" : "bshd", recompute ? " recompute" : "", d_logits, d_hidden, d_loss,
              worst_grad);
}

LlamaConfig tiny_config() {
  LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 128;
  return c;
}

}  // namespace

TEST(ModelsLlamaParity, TinyPadded) { check_case("llama_tiny", false); }
TEST(ModelsLlamaParity, TinyPacked) { check_case("llama_tiny", true); }
TEST(ModelsLlamaParity, TinyPackedRecompute) { check_case("llama_tiny", true, -1); }
TEST(ModelsLlamaParity, TinyPackedRecomputeFirstLayerOnly) { check_case("llama_tiny", true, 1); }
TEST(ModelsLlamaParity, TinyPackedSeparateQkv) {
  testkit::ScopedOpOptions off([](ops::OpOptions& o) { o.attention_packed_qkv = false; });
  check_case("llama_tiny", true);
}
TEST(ModelsLlamaParity, TiedPadded) { check_case("llama_tied", false); }
TEST(ModelsLlamaParity, TiedPacked) { check_case("llama_tied", true); }

TEST(ModelsLlamaConfig, BothConfigShapesParseAlike) {
  for (const char* name : {"llama_tiny", "llama_tied"}) {
    SCOPED_TRACE(name);
    const std::string d = fixture_dir(name);
    LlamaConfig a = llama_config_from_hf_json(read_file(d + "/config.json"), "config.json");
    LlamaConfig b = llama_config_from_hf_json(read_file(d + "/config.legacy.json"), "config.legacy.json");
    EXPECT_EQ(a.hidden_size, 64);
    EXPECT_EQ(a.num_attention_heads, 4);
    EXPECT_EQ(a.num_key_value_heads, 2);
    EXPECT_EQ(a.head_size(), 16);
    EXPECT_EQ(a.rope_theta, 500000.0);
    EXPECT_EQ(a.eos_token_id, 0);
    EXPECT_EQ(a.bos_token_id, 2);
    EXPECT_EQ(a.pad_token_id, 1);
    for (const LlamaConfig* c : {&a, &b}) EXPECT_EQ(c->tie_word_embeddings, std::string(name) == "llama_tied");
    EXPECT_EQ(a.vocab_size, b.vocab_size);
    EXPECT_EQ(a.hidden_size, b.hidden_size);
    EXPECT_EQ(a.intermediate_size, b.intermediate_size);
    EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
    EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
    EXPECT_EQ(a.head_size(), b.head_size());
    EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
    EXPECT_EQ(a.rope_theta, b.rope_theta);
    EXPECT_EQ(a.rope_type, b.rope_type);
    EXPECT_EQ(a.rope_factor, b.rope_factor);
    EXPECT_EQ(a.low_freq_factor, b.low_freq_factor);
    EXPECT_EQ(a.high_freq_factor, b.high_freq_factor);
    EXPECT_EQ(a.original_max_position_embeddings, b.original_max_position_embeddings);
    EXPECT_EQ(a.inv_freq(), b.inv_freq());
    // Same model either way: write the legacy config next to the weights and compare logits.
    const std::string legacy = testing::TempDir() + "/llama_legacy_" + name;
    std::filesystem::create_directories(legacy);
    std::filesystem::copy_file(d + "/config.legacy.json", legacy + "/config.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(d + "/model.safetensors", legacy + "/model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    auto ma = LlamaModel::from_hf_dir(d, Device::CPU);
    auto mb = LlamaModel::from_hf_dir(legacy, Device::CPU);
    SafetensorsFile ref = read_safetensors(d + "/reference.safetensors");
    std::vector<int64_t> row_of;
    Batch batch = testkit::hf_fixture_batch(ref, true, /*shift_labels=*/true, row_of);
    EXPECT_EQ(max_diff(ma->logits(batch), mb->logits(batch)), 0.0);
  }
}

TEST(ModelsLlamaConfig, Llama3RopeRemapMatchesTransformers) {
  LlamaConfig c = llama_config_from_hf_json(read_file(fixture_dir("llama_tiny") + "/config.json"), "llama_tiny");
  ASSERT_EQ(c.rope_type, "llama3");
  EXPECT_EQ(c.rope_factor, 8.0);
  EXPECT_EQ(c.original_max_position_embeddings, 64);
  // transformers 5.17 ROPE_INIT_FUNCTIONS["llama3"](config) for this config, as fp32 bits:
  // branches high (kept), medium (smoothed) and low (/factor) all occur.
  const uint32_t want[8] = {1065353216u, 1034067468u, 999950536u, 980350799u,
                            960060705u,  940558584u,  920588484u, 900532135u};
  std::vector<float> f = c.inv_freq();
  ASSERT_EQ(f.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    float w;
    std::memcpy(&w, &want[i], 4);
    EXPECT_NEAR(f[i], w, 2e-6 * w) << "frequency " << i;
  }
  // Plain rope (the tied fixture) is 500000^(-2i/16), unscaled.
  LlamaConfig t = llama_config_from_hf_json(read_file(fixture_dir("llama_tied") + "/config.json"), "llama_tied");
  EXPECT_EQ(t.rope_type, "default");
  std::vector<float> g = t.inv_freq();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], std::pow(500000.0, -double(2 * i) / 16.0), 1e-6 * g[i]);
  EXPECT_GT(g[7] / f[7], 7.9);  // the lowest frequency is divided by the factor 8
}

TEST(ModelsLlamaConfig, RejectsWhatItCannotRun) {
  auto parse = [](const std::string& s) { return llama_config_from_hf_json(s, "test.json"); };
  EXPECT_THROW(parse("{\"model_type\": \"esm\"}"), Error);
  EXPECT_THROW(parse("{\"hidden_size\": 64, \"num_attention_heads\": 4, \"hidden_act\": \"gelu\"}"), Error);
  EXPECT_THROW(parse("{\"hidden_size\": 64, \"num_attention_heads\": 4, \"attention_bias\": true}"), Error);
  EXPECT_THROW(parse("{\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 3}"), Error);
  EXPECT_THROW(parse("{\"hidden_size\": 64, \"num_attention_heads\": 4, \"rope_scaling\": {\"rope_type\": \"yarn\", "
                     "\"factor\": 2.0}}"),
               Error);
  EXPECT_THROW(parse("{\"hidden_size\": 64, \"num_attention_heads\": 4, \"rope_parameters\": {\"rope_type\": "
                     "\"llama3\", \"rope_theta\": 10000.0}}"),
               Error);  // llama3 without its factors
  EXPECT_THROW(parse("not json"), Error);
  // The old `type` key and a missing original_max_position_embeddings (→ max_position_embeddings).
  LlamaConfig c = parse(
      "{\"hidden_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 256, \"max_position_embeddings\": 512, "
      "\"rope_theta\": 1000.0, \"rope_scaling\": {\"type\": \"llama3\", \"factor\": 4.0, \"low_freq_factor\": 1.0, "
      "\"high_freq_factor\": 4.0}, \"eos_token_id\": [0, 5]}");
  EXPECT_EQ(c.rope_type, "llama3");
  EXPECT_EQ(c.original_max_position_embeddings, 512);
  EXPECT_EQ(c.rope_theta, 1000.0);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.eos_token_id, 0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);  // transformers' default when absent
}

TEST(ModelsLlamaConfig, WrittenConfigReadsBack) {
  LlamaConfig c = tiny_config();
  c.rope_type = "llama3";
  c.rope_factor = 8.0;
  c.original_max_position_embeddings = 32;
  c.tie_word_embeddings = true;
  c.head_dim = 16;  // != hidden/heads
  LlamaConfig d = llama_config_from_hf_json(llama_config_to_hf_json(c), "roundtrip");
  EXPECT_EQ(d.head_size(), 16);
  EXPECT_EQ(d.q_size(), 64);
  EXPECT_EQ(d.rope_type, "llama3");
  EXPECT_EQ(d.original_max_position_embeddings, 32);
  EXPECT_TRUE(d.tie_word_embeddings);
  EXPECT_EQ(d.inv_freq(), c.inv_freq());
  EXPECT_EQ(d.rms_norm_eps, 1e-5);
  EXPECT_NE(llama_config_to_hf_json(c).find("\"rope_parameters\""), std::string::npos);
  // The transformers 4.x spelling of the same RoPE is written too (4.x reads only top-level
  // rope_theta and rope_scaling): without rope_parameters the file reads as the same model.
  c.rope_theta = 250000.0;
  nlohmann::json legacy = nlohmann::json::parse(llama_config_to_hf_json(c));
  legacy.erase("rope_parameters");
  EXPECT_EQ(legacy["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(legacy["torch_dtype"], "float32");
  const LlamaConfig e = llama_config_from_hf_json(legacy.dump(), "legacy");
  EXPECT_EQ(e.rope_theta, 250000.0);
  EXPECT_EQ(e.rope_type, "llama3");
  EXPECT_EQ(e.rope_factor, 8.0);
  EXPECT_EQ(e.original_max_position_embeddings, 32);
  EXPECT_EQ(e.inv_freq(), c.inv_freq());
  c.rope_type = "default";  // no scaling: rope_scaling null, as 4.x writes it
  EXPECT_TRUE(nlohmann::json::parse(llama_config_to_hf_json(c))["rope_scaling"].is_null());
}

// Tied weights: the embedding's gradient is the sum of its two uses (lookup and LM head).
// An untied copy with lm_head = embedding gives the two parts separately.
TEST(ModelsLlama, TiedEmbeddingGradientSumsBothUses) {
  auto tied = LlamaModel::from_hf_dir(fixture_dir("llama_tied"), Device::CPU);
  LlamaConfig uc = tied->config();
  uc.tie_word_embeddings = false;
  LlamaModel untied(uc, Device::CPU);
  SafetensorsFile f;
  f.tensors = tied->params().export_tensors(DType::F32);
  f.tensors["lm_head.weight"] = f.tensors.at("model.embed_tokens.weight").clone();
  f.source = "tied copy";
  untied.params().load(f, nullptr);
  SafetensorsFile ref = read_safetensors(fixture_dir("llama_tied") + "/reference.safetensors");
  std::vector<int64_t> row_of;
  Batch batch = testkit::hf_fixture_batch(ref, true, /*shift_labels=*/true, row_of);
  for (LlamaModel* m : {tied.get(), &untied}) {
    m->params().zero_grad();
    Tensor acc = Tensor::zeros({1}, DType::F32);
    m->forward_backward(batch, 1.0f / float(batch.num_label_tokens), acc);
  }
  Tensor g_tied = tied->params().grad("model.embed_tokens.weight");
  Tensor g_emb = untied.params().grad("model.embed_tokens.weight");
  Tensor g_head = untied.params().grad("lm_head.weight");
  Tensor sum = g_emb.clone();
  for (int64_t i = 0; i < sum.numel(); ++i) sum.f32()[i] += g_head.f32()[i];
  EXPECT_LT(max_diff(g_tied, sum), 1e-6 * std::max(1.0, testkit::max_abs(sum)));
  EXPECT_GT(testkit::max_abs(g_emb), 1e-4);   // both parts matter
  EXPECT_GT(testkit::max_abs(g_head), 1e-4);
  EXPECT_EQ(tied->params().size() + 1, untied.params().size());
}

TEST(ModelsLlama, GroupedQueryShapes) {
  auto m = LlamaModel::from_hf_dir(fixture_dir("llama_tiny"), Device::CPU);
  EXPECT_EQ(m->params().param("model.layers.0.self_attn.q_proj.weight").shape(), (Shape{64, 64}));
  EXPECT_EQ(m->params().param("model.layers.0.self_attn.k_proj.weight").shape(), (Shape{32, 64}));
  EXPECT_EQ(m->params().param("model.layers.1.self_attn.v_proj.weight").shape(), (Shape{32, 64}));
  EXPECT_EQ(m->dims().kv_heads, 2);
  EXPECT_EQ(m->dims().parameters, m->config().num_parameters());
  int64_t n = 0;
  for (const auto& s : m->params().specs()) n += shape_numel(s.shape);
  EXPECT_EQ(n, m->config().num_parameters());
}

TEST(ModelsLlama, ExportImportRoundTrip) {
  for (bool tie : {false, true}) {
    LlamaConfig c = tiny_config();
    c.tie_word_embeddings = tie;
    LlamaModel a(c, Device::CPU);
    a.params().init(123);
    std::string dir = testing::TempDir() + "/llama_export_" + std::to_string(tie);
    a.save_hf_dir(dir);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json"})
      EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
    SafetensorsFile st = read_safetensors(dir + "/model.safetensors");
    EXPECT_EQ(st.has("lm_head.weight"), !tie);
    EXPECT_EQ(model_type_of_dir(dir), "llama");
    auto b = load_model_dir(dir, Device::CPU);
    EXPECT_EQ(b->family(), "llama");
    ASSERT_EQ(a.params().numel(), b->params().numel());
    for (int64_t i = 0; i < a.params().numel(); ++i) ASSERT_EQ(a.params().flat().f32()[i], b->params().flat().f32()[i]);
  }
  // A checkpoint that still carries rotary inv_freq buffers loads; a tied model ignores a
  // redundant lm_head.weight.
  LlamaConfig c = tiny_config();
  c.tie_word_embeddings = true;
  LlamaModel a(c, Device::CPU);
  a.params().init(5);
  std::string dir = testing::TempDir() + "/llama_extra_tensors";
  a.save_hf_dir(dir);
  auto tensors = a.params().export_tensors(DType::BF16);
  tensors["model.rotary_emb.inv_freq"] = Tensor::from_f32({8}, std::vector<float>(8, 1.0f));
  tensors["lm_head.weight"] = tensors.at("model.embed_tokens.weight");
  write_safetensors(dir + "/model.safetensors", tensors);
  EXPECT_NO_THROW(LlamaModel::from_hf_dir(dir, Device::CPU));
}

TEST(ModelsLlama, CorruptCheckpointsFailClearly) {
  EXPECT_THROW(LlamaModel::from_hf_dir(testing::TempDir() + "/llama_missing", Device::CPU), Error);
  LlamaConfig c = tiny_config();
  LlamaModel a(c, Device::CPU);
  a.params().init(1);
  std::string dir = testing::TempDir() + "/llama_corrupt";
  a.save_hf_dir(dir);
  auto tensors = a.params().export_tensors(DType::F32);
  tensors.erase("model.layers.1.mlp.up_proj.weight");
  write_safetensors(dir + "/model.safetensors", tensors);
  try {
    LlamaModel::from_hf_dir(dir, Device::CPU);
    FAIL() << "a missing tensor must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << e.what();
  }
}

TEST(ModelsLlama, InitFollowsRecipeRules) {
  LlamaConfig c = tiny_config();
  c.hidden_size = 64;
  c.intermediate_size = 256;
  c.num_hidden_layers = 8;
  auto rms = [](const Tensor& w) {
    double s2 = 0;
    for (int64_t i = 0; i < w.numel(); ++i) s2 += double(w.f32()[i]) * w.f32()[i];
    return std::sqrt(s2 / double(w.numel()));
  };
  {
    LlamaModel m(c, Device::CPU);
    m.params().init(7);
    EXPECT_NEAR(rms(m.params().param("model.layers.0.mlp.gate_proj.weight")), 0.02, 0.002);
    EXPECT_NEAR(rms(m.params().param("model.layers.0.mlp.down_proj.weight")), 0.02, 0.002);
    EXPECT_NEAR(rms(m.params().param("model.embed_tokens.weight")), 0.02, 0.002);
    EXPECT_EQ(m.params().param("model.norm.weight").f32()[3], 1.0f);
    Tensor emb = m.params().param("model.embed_tokens.weight");
    for (int64_t h = 0; h < 64; ++h) EXPECT_EQ(emb.f32()[1 * 64 + h], 0.0f) << "<PAD> row not zero";
    for (const auto& s : m.params().specs()) EXPECT_TRUE(s.decay) << s.name;
  }
  {  // OpenGenome2: Spike-No-More embeddings, Megatron scaled init, decay grouping.
    c.embedding_init_std = 1.0;
    c.scaled_init = true;
    LlamaModel m(c, Device::CPU, Precision::F32, /*no_decay_on_1d_and_embeddings=*/true);
    m.params().init(7);
    EXPECT_NEAR(rms(m.params().param("model.embed_tokens.weight")), 1.0, 0.05);
    const double scaled = 0.02 / std::sqrt(2.0 * 8);
    EXPECT_NEAR(rms(m.params().param("model.layers.3.mlp.down_proj.weight")), scaled, 0.1 * scaled);
    EXPECT_NEAR(rms(m.params().param("model.layers.3.self_attn.o_proj.weight")), scaled, 0.1 * scaled);
    EXPECT_NEAR(rms(m.params().param("model.layers.3.self_attn.q_proj.weight")), 0.02, 0.002);
    EXPECT_NEAR(rms(m.params().param("lm_head.weight")), 0.02, 0.002);
    for (const auto& s : m.params().specs()) {
      const bool want = s.shape.size() > 1 && s.name != "model.embed_tokens.weight";
      EXPECT_EQ(s.decay, want) << s.name;
    }
  }
}

// make_model builds a Llama from a training config; its batcher's batches train.
TEST(ModelsLlama, FromTrainConfigAndCausalBatches) {
  TrainConfig cfg;
  cfg.model.family = "llama";
  auto& m = cfg.model.config;
  m.hidden_size = 32;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  m.intermediate_size = 64;
  m.vocab_size = 256;
  m.hidden_act = "silu";
  m.tie_word_embeddings = false;
  m.rope_theta = 500000.0;
  cfg.optimizer.no_decay_on_1d_and_embeddings = true;
  auto model = make_model(cfg, Device::CPU);
  ASSERT_EQ(model->family(), "llama");
  EXPECT_EQ(model->dims().kv_heads, 2);
  EXPECT_FALSE(model->params().spec(model->params().index("model.norm.weight")).decay);

  SequenceDataset data = SequenceDataset::from_sequences(
      {"ACGTACGTTTGACCAGTNNACGTAGGCTAGCTAGGATCGATCGGATCGATTAGC", "acgtgggcccaaatttACGTAC", "GATTACA"});
  CausalLmOptions o;
  o.max_seq_length = 24;
  o.stride = 4;
  o.max_tokens_per_batch = 64;
  o.shuffle = false;
  CausalLmBatcher batcher(data, o);
  Batch b = batcher.next();
  model->params().zero_grad();
  Tensor acc = Tensor::zeros({1}, DType::F32);
  model->forward_backward(b, 1.0f / float(b.num_label_tokens), acc);
  const double loss = acc.f32()[0] / double(b.num_label_tokens);
  EXPECT_NEAR(loss, std::log(256.0), 0.1);  // near-uniform at init
  Tensor tl = model->token_losses(b);
  double s = 0;
  for (int64_t i = 0; i < tl.numel(); ++i) {
    if (b.labels.i32()[i] == -100) EXPECT_EQ(tl.f32()[i], 0.0f);
    s += tl.f32()[i];
  }
  EXPECT_NEAR(s, acc.f32()[0], 1e-3);
}

TEST(ModelsLlama, TokenizerJsonIsByteVocabulary) {
  const std::string j = nucleotide_tokenizer_json();
  EXPECT_NE(j.find("\"<BOS>\": 2"), std::string::npos);
  EXPECT_NE(j.find("\"A\": 65"), std::string::npos);
  EXPECT_NE(j.find("\"t\": 116"), std::string::npos);
  EXPECT_NE(j.find("WordLevel"), std::string::npos);
}
