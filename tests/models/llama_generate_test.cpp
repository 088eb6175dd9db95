// Llama generation: the KV-cached incremental path against the uncached reference (full
// forward over the whole prefix each step), and the sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>

#include "biofm/data/tokenizer.h"
#include "biofm/models/llama/generate.h"
#include "biofm/models/llama/model.h"

using namespace biofm;

namespace {

std::string fixture_dir(const std::string& name) {
  return std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/" + name;
}

// A random tiny model with spread-out logits (no near-ties for greedy decoding to trip on).
std::unique_ptr<LlamaModel> random_model(bool tied, const std::string& rope_type = "default") {
  LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 48;
  c.intermediate_size = 96;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 256;
  c.rope_theta = 10000.0;
  c.rope_type = rope_type;
  c.original_max_position_embeddings = 16;
  c.tie_word_embeddings = tied;
  c.initializer_range = 0.2;
  c.embedding_init_std = 1.0;
  auto m = std::make_unique<LlamaModel>(c, Device::CPU);
  m->params().init(tied ? 11 : 12);
  return m;
}

std::vector<int32_t> prompt_ids(const std::string& bases) {
  std::vector<int32_t> ids{NucleotideTokenizer::kBos};
  NucleotideTokenizer().encode_residues(bases, ids);
  return ids;
}

Batch one_sequence(const std::vector<int32_t>& ids) {
  const int64_t n = int64_t(ids.size());
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::iota(pos.begin(), pos.end(), 0);
  Batch b;
  b.input_ids = Tensor::from_i32({n}, ids);
  b.labels = Tensor::from_i32({n}, std::vector<int32_t>(size_t(n), -100));
  b.positions = Tensor::from_i32({n}, pos);
  b.cu_seqlens = Tensor::from_i32({2}, {0, int32_t(n)});
  b.seq_lens = Tensor::from_i32({1}, {int32_t(n)});
  b.max_seqlen = int32_t(n);
  b.num_real_tokens = n;
  return b;
}

// The cache's per-row logits equal a full forward's, fed in chunks of `chunk` tokens.
void check_cached_logits(LlamaModel& m, int64_t chunk) {
  std::vector<int32_t> ids = prompt_ids("ACGTTGCAAGGCTTACGATCGATTGCAGGCATCGAT");
  Tensor full = m.logits(one_sequence(ids));
  const int64_t V = full.size(1), n = int64_t(ids.size());
  LlamaKvCache cache = m.new_cache(n);
  const int64_t first = 5;  // a 5-token prompt, then chunks
  double worst = 0;
  for (int64_t start = 0; start < n;) {
    const int64_t len = start == 0 ? first : std::min(chunk, n - start);
    std::vector<int32_t> part(ids.begin() + start, ids.begin() + start + len);
    Tensor lg = m.forward_cached(part, cache);
    ASSERT_EQ(lg.size(0), len);
    for (int64_t i = 0; i < len; ++i)
      for (int64_t v = 0; v < V; ++v)
        worst = std::max(worst, double(std::fabs(lg.f32()[i * V + v] - full.f32()[(start + i) * V + v])));
    start += len;
  }
  EXPECT_EQ(cache.length, n);
  EXPECT_LT(worst, 1e-4) << "chunk " << chunk;
}

}  // namespace

TEST(ModelsLlamaGenerate, CachedLogitsMatchFullForward) {
  for (bool tied : {false, true}) {
    auto m = random_model(tied, tied ? "default" : "llama3");
    check_cached_logits(*m, 1);
    check_cached_logits(*m, 3);
  }
  auto f = LlamaModel::from_hf_dir(fixture_dir("llama_tiny"), Device::CPU);
  check_cached_logits(*f, 1);
  LlamaKvCache small = f->new_cache(4);
  EXPECT_THROW(f->forward_cached(prompt_ids("ACGTACGT"), small), Error);
}

TEST(ModelsLlamaGenerate, CachedEqualsUncached) {
  std::vector<std::unique_ptr<LlamaModel>> models;
  models.push_back(random_model(false, "llama3"));
  models.push_back(random_model(true));
  models.push_back(LlamaModel::from_hf_dir(fixture_dir("llama_tiny"), Device::CPU));
  models.push_back(LlamaModel::from_hf_dir(fixture_dir("llama_tied"), Device::CPU));
  const std::vector<int32_t> prompt = prompt_ids("ACGTTGCA");
  for (size_t k = 0; k < models.size(); ++k) {
    LlamaModel& m = *models[k];
    for (int mode = 0; mode < 3; ++mode) {
      GenerateOptions o;
      o.max_new_tokens = 24;
      o.stop_at_eos = false;
      if (mode >= 1) o.temperature = 1.0f, o.seed = 1234 + k;
      if (mode == 2) o.top_k = 4;
      SCOPED_TRACE("model " + std::to_string(k) + " mode " + std::to_string(mode));
      GenerateResult a = generate(m, prompt, o);
      GenerateResult b = generate_uncached(m, prompt, o);
      ASSERT_EQ(a.tokens.size(), 24u);
      EXPECT_EQ(a.tokens, b.tokens);
      GenerateResult again = generate(m, prompt, o);
      EXPECT_EQ(a.tokens, again.tokens) << "same seed, same tokens";
      if (mode >= 1) {
        o.seed += 1000;
        EXPECT_NE(generate(m, prompt, o).tokens, a.tokens) << "another seed, other tokens";
      }
    }
  }
}

TEST(ModelsLlamaGenerate, StopsAtEos) {
  auto m = random_model(false);
  // A zero LM head makes every logit 0: greedy then picks the lowest id, <EOS> = 0.
  m->params().param("lm_head.weight").zero_();
  GenerateOptions o;
  o.max_new_tokens = 10;
  GenerateResult r = generate(*m, prompt_ids("ACGT"), o);
  EXPECT_TRUE(r.stopped_at_eos);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{NucleotideTokenizer::kEos});
  EXPECT_EQ(generate_uncached(*m, prompt_ids("ACGT"), o).tokens, r.tokens);
  o.stop_at_eos = false;
  EXPECT_EQ(generate(*m, prompt_ids("ACGT"), o).tokens.size(), 10u);
  o.max_new_tokens = 0;
  EXPECT_TRUE(generate(*m, prompt_ids("ACGT"), o).tokens.empty());
  EXPECT_THROW(generate(*m, {}, o), Error);
}

TEST(ModelsLlamaGenerate, Sampler) {
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(4.0f), std::log(1.0f), -1e9f};
  GenerateOptions o;
  EXPECT_EQ(sample_next_token(logits.data(), 5, o, 0), 2);  // greedy
  o.temperature = 1.0f;
  o.top_k = 1;
  for (uint64_t s = 0; s < 20; ++s) EXPECT_EQ(sample_next_token(logits.data(), 5, o, s), 2);
  // Frequencies follow softmax: 1:2:4:1 over ids 0..3 (id 4 never).
  o.top_k = 0;
  std::vector<int> count(5, 0);
  const int n = 8000;
  for (int s = 0; s < n; ++s) ++count[size_t(sample_next_token(logits.data(), 5, o, uint64_t(s)))];
  EXPECT_EQ(count[4], 0);
  EXPECT_NEAR(count[2] / double(n), 0.5, 0.025);
  EXPECT_NEAR(count[1] / double(n), 0.25, 0.025);
  EXPECT_NEAR(count[0] / double(n), 0.125, 0.02);
  // top_k 2 keeps ids 2 and 1 (4:2).
  o.top_k = 2;
  std::fill(count.begin(), count.end(), 0);
  for (int s = 0; s < n; ++s) ++count[size_t(sample_next_token(logits.data(), 5, o, uint64_t(s)))];
  EXPECT_EQ(count[0] + count[3] + count[4], 0);
  EXPECT_NEAR(count[2] / double(n), 2.0 / 3.0, 0.025);
  // A low temperature sharpens towards the argmax.
  o.top_k = 0;
  o.temperature = 0.05f;
  for (uint64_t s = 0; s < 50; ++s) EXPECT_EQ(sample_next_token(logits.data(), 5, o, s), 2);
}

// `allowed` restricts both greedy decoding and sampling to the given ids.
TEST(ModelsLlamaGenerate, AllowedTokensRestrictThePick) {
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 4.0f, 3.0f};
  GenerateOptions o;
  o.allowed = {2, 4, 4, 9};  // (duplicates and ids past the vocabulary are ignored)
  EXPECT_EQ(sample_next_token(logits.data(), 5, o, 0), 4);  // greedy among {2, 4}
  o.temperature = 1.0f;
  std::set<int32_t> seen;
  for (uint64_t step = 0; step < 200; ++step) seen.insert(sample_next_token(logits.data(), 5, o, step));
  EXPECT_EQ(seen, (std::set<int32_t>{2, 4}));
  o.top_k = 1;
  for (uint64_t step = 0; step < 20; ++step) EXPECT_EQ(sample_next_token(logits.data(), 5, o, step), 4);
  o.allowed = {7};
  EXPECT_THROW(sample_next_token(logits.data(), 5, o, 0), Error);
}
