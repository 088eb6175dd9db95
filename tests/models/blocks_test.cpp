// Blocks the shipped families do not use yet (post-norm layers, learned absolute positions,
// an embedding LayerNorm: the BERT / Geneformer shape), checked with finite differences of
// the loss through TransformerLM, and their recompute / lean policies against keeping all; the
// GPU's rule for FP8 attention (full windows only) and its note.
#include <gtest/gtest.h>

#include "biofm/core/notes.h"
#include "biofm/data/pack.h"
#include "biofm/data/tokenizer.h"
#include "biofm/models/blocks/attention.h"
#include "biofm/models/transformer_lm.h"
#include "models/tiny_models.h"
#include "testing.h"

using namespace biofm;

namespace {

constexpr int64_t H = 16, F = 32, V = 33, P = 64, L = 2;

std::string at(int l, const std::string& rest) { return "layer." + std::to_string(l) + "." + rest; }

// A BERT-like masked LM: post-norm layers (biases everywhere, GELU), learned positions and an
// embedding LayerNorm, no final norm, dense-GELU-LayerNorm head with a tied decoder.
std::vector<ParamSpec> bert_table() {
  std::vector<ParamSpec> t;
  auto vec = [&](const std::string& n, int64_t k, Init init, bool fuse = false) {
    t.push_back({n, {k}, init, init == Init::Normal ? 0.1f : 0.0f, true, -1, fuse});
  };
  auto mat = [&](const std::string& n, int64_t o, int64_t i, bool fuse = false) {
    t.push_back({n, {o, i}, Init::Normal, 0.2f, true, -1, fuse});
  };
  mat("embed.word", V, H);
  mat("embed.position", P, H);
  vec("embed.norm.weight", H, Init::Ones);
  vec("embed.norm.bias", H, Init::Normal);
  for (int l = 0; l < L; ++l) {
    for (const char* w : {"q", "k", "v"}) mat(at(l, std::string(w) + ".weight"), H, H, w[0] != 'v');
    for (const char* w : {"q", "k", "v"}) vec(at(l, std::string(w) + ".bias"), H, Init::Normal, w[0] != 'v');
    mat(at(l, "o.weight"), H, H);
    vec(at(l, "o.bias"), H, Init::Normal);
    vec(at(l, "norm1.weight"), H, Init::Ones);
    vec(at(l, "norm1.bias"), H, Init::Normal);
    mat(at(l, "fc1.weight"), F, H);
    vec(at(l, "fc1.bias"), F, Init::Normal);
    mat(at(l, "fc2.weight"), H, F);
    vec(at(l, "fc2.bias"), H, Init::Normal);
    vec(at(l, "norm2.weight"), H, Init::Ones);
    vec(at(l, "norm2.bias"), H, Init::Normal);
  }
  mat("head.dense.weight", H, H);
  vec("head.dense.bias", H, Init::Normal);
  vec("head.norm.weight", H, Init::Ones);
  vec("head.norm.bias", H, Init::Normal);
  vec("head.bias", V, Init::Normal);
  return t;
}

ArchSpec bert_arch() {
  ArchSpec s;
  s.hidden = H;
  s.layers = L;
  s.heads = s.kv_heads = 4;
  s.head_dim = H / 4;
  s.ffn = F;
  s.vocab = V;
  s.max_positions = P;
  s.norm = NormKind::LayerNorm;
  s.mlp = MlpKind::Gelu;
  s.pre_norm = false;
  s.embed_weight = "embed.word";
  s.position_embed_weight = "embed.position";
  s.embed_norm_weight = "embed.norm.weight";
  s.embed_norm_bias = "embed.norm.bias";
  s.layer_names = [](int l) {
    LayerParamNames n;
    n.qkv_weight = {at(l, "q.weight"), at(l, "k.weight"), at(l, "v.weight")};
    n.qkv_bias = {at(l, "q.bias"), at(l, "k.bias"), at(l, "v.bias")};
    n.out_weight = at(l, "o.weight");
    n.out_bias = at(l, "o.bias");
    n.norm1_weight = at(l, "norm1.weight");
    n.norm1_bias = at(l, "norm1.bias");
    n.mlp_in_weight = {at(l, "fc1.weight")};
    n.mlp_in_bias = at(l, "fc1.bias");
    n.mlp_out_weight = at(l, "fc2.weight");
    n.mlp_out_bias = at(l, "fc2.bias");
    n.norm2_weight = at(l, "norm2.weight");
    n.norm2_bias = at(l, "norm2.bias");
    return n;
  };
  s.head_dense_weight = "head.dense.weight";
  s.head_dense_bias = "head.dense.bias";
  s.head_norm_weight = "head.norm.weight";
  s.head_norm_bias = "head.norm.bias";
  s.decoder_weight = "embed.word";
  s.decoder_bias = "head.bias";
  return s;
}

class BertLike : public TransformerLM {
 public:
  BertLike() : TransformerLM(bert_table(), bert_arch(), Device::CPU, Precision::F32) { params().init(3); }
  std::string family() const override { return "bert-like"; }
  void save_hf_metadata(const std::string&) const override {}
};

Batch masked_batch() {
  const ModelFamily& esm = family_named("esm2");
  SequenceDataset data = testkit::bundled_data(esm);
  DataOptions d = testkit::small_batches();
  d.max_seq_length = 24;
  d.max_tokens_per_batch = 60;
  d.mlm_probability = 0.3;
  static SequenceDataset keep = std::move(data);  // the source reads it lazily
  return esm.batches(d, keep)->next();
}

}  // namespace

TEST(Blocks, PostNormPositionsAndEmbeddingNormMatchFiniteDifferences) {
  BertLike m;
  Batch b = masked_batch();
  ASSERT_GT(b.num_label_tokens, 0);
  m.params().zero_grad();
  Tensor loss = Tensor::zeros({1}, DType::F32);
  m.forward_backward(b, 1.0f, loss);
  auto objective = [&] { return m.evaluate(b, false).loss_sum; };
  testkit::FdOptions o;
  o.eps = 1e-2;
  o.rtol = 3e-2;
  o.max_samples = 24;
  for (const char* n : {"embed.position", "embed.norm.weight", "embed.norm.bias", "layer.0.q.weight", "layer.0.v.bias",
                        "layer.0.norm1.weight", "layer.0.norm1.bias", "layer.1.fc1.weight", "layer.1.norm2.bias",
                        "layer.1.o.weight", "head.norm.weight", "embed.word"}) {
    EXPECT_TRUE(testkit::fd_check(n, objective, m.params().param(n), m.params().grad(n), o));
  }
}

TEST(Blocks, PostNormRecomputeAndLeanGiveTheSameGradients) {
  BertLike m;
  Batch b = masked_batch();
  auto grads = [&](bool recompute, int layers) {
    m.set_recompute(recompute, layers);
    m.params().zero_grad();
    Tensor loss = Tensor::zeros({1}, DType::F32);
    m.forward_backward(b, 1.0f / float(b.num_label_tokens), loss);
    return m.params().grad_flat().clone();
  };
  const Tensor all = grads(false, -1);
  for (int layers : {-1, 1}) {  // every layer recomputed; the first recomputed, the second lean
    const Tensor g = grads(true, layers);
    for (int64_t i = 0; i < all.numel(); ++i) ASSERT_EQ(g.f32()[i], all.f32()[i]) << "recompute " << layers << " at " << i;
  }
}

// fp8_dpa on the GPU takes full windows only: a batch with a shorter one runs its attention in
// bf16, said once per process through the notes sink (a BiofmWarning in Python), not on stderr.
TEST(Blocks, Fp8AttentionOnShorterWindowsIsANote) {
  auto batch = [](std::vector<int64_t> lengths) {
    BatchBuilder builder;
    for (int64_t n : lengths) {
      const std::vector<int32_t> ids(size_t(n), 5), labels(size_t(n), -100);
      builder.add(ids.data(), labels.data(), n);
    }
    return builder.build(BatchMode::Thd, 1, 1);
  };
  const Batch full = batch({8, 8}), ragged = batch({8, 5});
  NoteCapture capture;
  testing::internal::CaptureStderr();
  EXPECT_TRUE(fp8_attention_takes(full, Device::CUDA));
  EXPECT_TRUE(fp8_attention_takes(ragged, Device::CPU));  // (the CPU's FP8 attention takes any batch)
  EXPECT_FALSE(fp8_attention_takes(ragged, Device::CUDA));
  EXPECT_FALSE(fp8_attention_takes(ragged, Device::CUDA));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(capture.notes().size(), 1u);
  EXPECT_EQ(capture.notes()[0],
            "fp8_dpa: batches that are not all full windows (here 8 tokens at most) run their attention in bf16; "
            "cuDNN's FP8 attention takes full windows only");
}
