// infer/embedder and the model's layer_hidden_states: layers against Hugging Face's
// hidden_states (fixtures), and batched / windowed / pooled embeddings against the same CPU
// fp32 model run by hand on one sequence at a time.
#include "biofm/infer/embedder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "biofm/data/pack.h"
#include "biofm/infer/batching.h"
#include "biofm/io/safetensors.h"
#include "biofm/models/registry.h"
#include "infer_test_util.h"
#include "hf_fixture.h"

using namespace biofm;
using namespace biofm::infer;

namespace {

using test::fixture;
using test::one_batch;

double max_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// A deterministic sequence of `len` characters from `alphabet`.
std::string make_seq(const std::string& alphabet, int64_t len, uint64_t seed) {
  std::string s;
  uint64_t x = seed * 2654435761u + 12345;
  for (int64_t i = 0; i < len; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    s += alphabet[(x >> 33) % alphabet.size()];
  }
  return s;
}

}  // namespace

// Every layer (0 = embedding output, L = after the final norm) against transformers'
// output_hidden_states, on the packed fixture batch.
TEST(InferLayers, MatchHuggingFaceHiddenStates) {
  for (const char* name : {"esm2_tiny", "llama_tiny"}) {
    SCOPED_TRACE(name);
    auto model = load_model_dir(fixture(name), Device::CPU);
    const SafetensorsFile ref = read_safetensors(fixture(name) + "/reference.safetensors");
    std::vector<int64_t> row_of;
    const Batch batch = testkit::hf_fixture_batch(ref, /*packed=*/true, /*shift_labels=*/false, row_of);
    const int L = int(model->dims().layers);
    const Tensor& mask = ref.get("attention_mask");
    std::vector<int> layers;
    for (int l = L; l >= 0; --l) layers.push_back(l);  // any order
    const std::vector<Tensor> got = model->layer_hidden_states(batch, layers);
    ASSERT_EQ(got.size(), layers.size());
    for (size_t k = 0; k < layers.size(); ++k) {
      const Tensor& want = ref.get("hidden_states." + std::to_string(layers[k]));
      const int64_t H = want.size(2);
      double worst = 0;
      for (size_t i = 0; i < row_of.size(); ++i) {
        if (row_of[i] < 0 || !mask.i32()[i]) continue;
        worst = std::max(worst, max_diff(got[k].f32() + row_of[i] * H, want.f32() + int64_t(i) * H, H));
      }
      EXPECT_LT(worst, 1e-4) << "layer " << layers[k];
    }
    // The final layer is what hidden_states returns.
    const Tensor fin = model->hidden_states(batch);
    EXPECT_EQ(max_diff(fin.f32(), got[0].f32(), fin.numel()), 0.0);
    EXPECT_THROW(model->layer_hidden_states(batch, {L + 1}), Error);
  }
}

// Pooled and per-token embeddings of many sequences, batched longest first in small batches,
// against each sequence run alone; results in input order.
TEST(InferEmbedder, BatchedPoolingMatchesOneByOne) {
  auto model = load_model_dir(fixture("esm2_tiny"), Device::CPU);
  const ModelFamily& fam = family_of_dir(fixture("esm2_tiny"));
  const Tokenizer& tok = fam.tokenizer();
  SequenceDataset data;
  for (int i = 0; i < 9; ++i) data.add(make_seq("ACDEFGHIKLMNPQRSTVWY", 3 + (i * 7) % 23, uint64_t(i)), "s" + std::to_string(i));
  const int64_t H = model->dims().hidden;
  for (Pooling pooling : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    SCOPED_TRACE(pooling_name(pooling));
    EmbedOptions o;
    o.layers = {2, 0, 1};
    o.pooling = pooling;
    o.per_token = true;
    o.max_tokens = 40;  // several sequences per batch, many batches
    o.window_tokens = 1024;
    Embedder e(*model, tok, o, /*causal=*/false);
    const EmbedResult r = e.run(data, 2, 6);  // records 2..7
    ASSERT_EQ(r.pooled.size(), 3u);
    ASSERT_EQ(r.offsets.size(), 7u);
    for (uint64_t k = 0; k < 6; ++k) {
      const std::vector<int32_t> ids = tok.encode(data.sequence(2 + k));
      const int64_t n = int64_t(ids.size());
      const std::vector<Tensor> want = model->layer_hidden_states(one_batch(ids), o.layers);
      EXPECT_EQ(r.offsets[k + 1] - r.offsets[k], n);
      for (size_t l = 0; l < 3; ++l) {
        std::vector<float> expect(size_t(H), 0.0f);
        if (pooling == Pooling::Mean) {
          for (int64_t t = 1; t + 1 < n; ++t)
            for (int64_t h = 0; h < H; ++h) expect[size_t(h)] += want[l].f32()[t * H + h] / float(n - 2);
        } else {
          const int64_t t = pooling == Pooling::Cls ? 0 : n - 1;
          for (int64_t h = 0; h < H; ++h) expect[size_t(h)] = want[l].f32()[t * H + h];
        }
        EXPECT_LT(max_diff(r.pooled[l].f32() + int64_t(k) * H, expect.data(), H), 1e-5) << "record " << k << " layer " << o.layers[l];
        EXPECT_LT(max_diff(r.token_states[l].f32() + r.offsets[k] * H, want[l].f32(), n * H), 1e-5);
      }
      for (int64_t t = 0; t < n; ++t) EXPECT_EQ(r.ids[size_t(r.offsets[k] + t)], ids[size_t(t)]);
    }
  }
}

// Long records in overlapping windows: each base's state comes from the window the rule
// names (causal: the first holding it; bidirectional: split at the middle of each overlap),
// computed here by running each window alone.
TEST(InferEmbedder, WindowsTakeEachBaseFromTheRightWindow) {
  for (const char* name : {"llama_tiny", "esm2_tiny"}) {
    SCOPED_TRACE(name);
    auto model = load_model_dir(fixture(name), Device::CPU);
    const ModelFamily& fam = family_of_dir(fixture(name));
    const bool causal = fam.objective == Objective::CausalLM;
    const Tokenizer& tok = fam.tokenizer();
    SequenceDataset data;
    data.add(make_seq(causal ? "ACGT" : "ACDEFGHIKLMNPQRSTVWY", 45, 7), "long");
    data.add(make_seq(causal ? "ACGT" : "ACDEFGHIKLMNPQRSTVWY", 6, 8), "short");
    EmbedOptions o;
    o.layers = {int(model->dims().layers)};
    o.pooling = Pooling::Mean;
    o.per_token = true;
    o.windows = true;
    o.window_tokens = 14;  // 12 bases per window
    o.stride = 4;
    o.max_tokens = 30;
    Embedder e(*model, tok, o, causal);
    const EmbedResult r = e.run(data, 0, 2);
    const int64_t H = model->dims().hidden;
    const std::string seq(data.sequence(0));
    ASSERT_EQ(r.offsets[1], int64_t(seq.size()) + 2);
    const auto ws = kept_windows(seq.size(), o.window_tokens, o.stride, causal);
    ASSERT_GT(ws.size(), 2u);
    std::vector<float> mean(size_t(H), 0.0f);
    for (size_t j = 0; j < ws.size(); ++j) {
      std::vector<int32_t> ids{tok.begin_id()};
      tok.encode_residues(seq.substr(ws[j].start, ws[j].length), ids);
      ids.push_back(tok.end_id());
      const Tensor s = model->hidden_states(one_batch(ids));
      for (uint64_t b = ws[j].keep_begin; b < ws[j].keep_end; ++b) {
        const float* want = s.f32() + int64_t(1 + b - ws[j].start) * H;
        EXPECT_LT(max_diff(r.token_states[0].f32() + int64_t(1 + b) * H, want, H), 1e-5) << "base " << b;
        for (int64_t h = 0; h < H; ++h) mean[size_t(h)] += want[h] / float(seq.size());
      }
      if (j == 0) EXPECT_LT(max_diff(r.token_states[0].f32(), s.f32(), H), 1e-5) << "<begin> from the first window";
      if (j + 1 == ws.size())
        EXPECT_LT(max_diff(r.token_states[0].f32() + int64_t(seq.size() + 1) * H, s.f32() + int64_t(ids.size() - 1) * H, H), 1e-5)
            << "<end> from the last window";
    }
    EXPECT_LT(max_diff(r.pooled[0].f32(), mean.data(), H), 1e-5) << "mean over every base once";
    EXPECT_EQ(r.truncated, 0u);
    EXPECT_EQ(r.windows, ws.size() + 1);
  }
}

TEST(InferEmbedder, TruncationIsCounted) {
  auto model = load_model_dir(fixture("esm2_tiny"), Device::CPU);
  const Tokenizer& tok = family_of_dir(fixture("esm2_tiny")).tokenizer();
  SequenceDataset data;
  data.add("ACDEFGHIKLMNPQ", "a");
  data.add("ACD", "b");
  EmbedOptions o;
  o.layers = {2};
  o.window_tokens = 8;
  o.per_token = true;
  const EmbedResult r = Embedder(*model, tok, o, false).run(data, 0, 2);
  EXPECT_EQ(r.truncated, 1u);
  EXPECT_EQ(r.offsets[1], 8);
  EXPECT_EQ(r.ids[7], tok.end_id()) << "a truncated record still ends with <eos>";
}

TEST(InferPooling, SelectSumAddsTheChosenRows) {
  Tensor h = Tensor::empty({5, 3}, DType::F32);
  for (int64_t i = 0; i < 15; ++i) h.f32()[i] = float(i) * 0.5f - 2.0f;
  const Tensor s = select_sum(h, {{0, 2}, {}, {4}, {1, 2, 3}});
  ASSERT_EQ(s.shape(), (Shape{4, 3}));
  for (int64_t c = 0; c < 3; ++c) {
    auto at = [&](int64_t r) { return h.f32()[r * 3 + c]; };
    EXPECT_FLOAT_EQ(s.f32()[0 * 3 + c], at(0) + at(2));
    EXPECT_FLOAT_EQ(s.f32()[1 * 3 + c], 0.0f);
    EXPECT_FLOAT_EQ(s.f32()[2 * 3 + c], at(4));
    EXPECT_FLOAT_EQ(s.f32()[3 * 3 + c], at(1) + at(2) + at(3));
  }
  EXPECT_THROW(select_sum(h, {{5}}), Error);
}
