// The inference path on the GPU against the CPU fp32 reference: embeddings (pooled on the device,
// per token, several layers, windows), pseudo-log-likelihoods and causal per-base scores, in
// fp32 (tight) and in bf16 (within bf16 round-off).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>

#include "biofm/cli/model_flags.h"
#include "biofm/infer/embedder.h"
#include "biofm/infer/scoring.h"
#include "biofm/models/registry.h"

using namespace biofm;
using namespace biofm::infer;

namespace {

std::string fixture(const std::string& name) { return std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/" + name; }

SequenceDataset proteins() {
  return SequenceDataset::load(std::string(BIOFM_SOURCE_DIR) + "/data/proteins_val.fasta");
}

// max |a - b| / max |b| over a tensor.
double rel_err(const Tensor& a, const Tensor& b) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    d = std::max(d, double(std::fabs(a.f32()[i] - b.f32()[i])));
    m = std::max(m, double(std::fabs(b.f32()[i])));
  }
  return d / std::max(m, 1e-30);
}

EmbedResult embed_on(Device dev, Precision p, const std::string& name, const SequenceDataset& data, bool windows,
                     bool per_token = true) {
  auto model = load_model_dir(fixture(name), dev, p);
  const ModelFamily& fam = family_of_dir(fixture(name));
  EmbedOptions o;
  o.layers = {int(model->dims().layers), 0, 1};
  o.pooling = Pooling::Mean;
  o.per_token = per_token;
  o.windows = windows;
  o.window_tokens = windows ? 100 : 1024;
  o.stride = windows ? 20 : 0;
  o.max_tokens = 4096;
  o.act_dtype = p == Precision::F32 ? DType::F32 : DType::BF16;
  return Embedder(*model, fam.tokenizer(), o, fam.objective == Objective::CausalLM).run(data, 0, data.size());
}

}  // namespace

TEST(CudaInfer, EmbeddingsMatchTheCpu) {
  const SequenceDataset data = proteins();
  const SequenceDataset dna = SequenceDataset::load(std::string(BIOFM_SOURCE_DIR) + "/data/dna_val.fasta");
  struct Case {
    const char* model;
    const SequenceDataset* data;
    bool windows;
  };
  for (const Case& c : {Case{"esm2_tiny", &data, false}, Case{"llama_tiny", &dna, true}}) {
    SCOPED_TRACE(c.model);
    const EmbedResult ref = embed_on(Device::CPU, Precision::F32, c.model, *c.data, c.windows);
    for (Precision p : {Precision::F32, Precision::Bf16}) {
      SCOPED_TRACE(precision_name(p));
      const double tol = p == Precision::F32 ? 1e-4 : 3e-2;
      const EmbedResult got = embed_on(Device::CUDA, p, c.model, *c.data, c.windows);
      ASSERT_EQ(got.pooled.size(), ref.pooled.size());
      for (size_t l = 0; l < ref.pooled.size(); ++l) {
        EXPECT_LT(rel_err(got.pooled[l], ref.pooled[l]), tol) << "pooled, layer index " << l;
        EXPECT_LT(rel_err(got.token_states[l], ref.token_states[l]), tol * 2) << "per token, layer index " << l;
      }
      EXPECT_EQ(got.ids, ref.ids);
      EXPECT_EQ(got.offsets, ref.offsets);
      // Pooled only: results come back asynchronously while the next batch runs (two pinned
      // buffers in turn, many batches here); they must be the same bits.
      const EmbedResult pooled_only = embed_on(Device::CUDA, p, c.model, *c.data, c.windows, /*per_token=*/false);
      ASSERT_EQ(pooled_only.pooled.size(), got.pooled.size());
      for (size_t l = 0; l < got.pooled.size(); ++l) {
        ASSERT_EQ(pooled_only.pooled[l].shape(), got.pooled[l].shape());
        EXPECT_EQ(0, std::memcmp(pooled_only.pooled[l].raw(), got.pooled[l].raw(), got.pooled[l].nbytes()))
            << "pooled-only run, layer index " << l;
      }
    }
  }
}

// --precision fp8 (cli/model_flags): the layers' projections as FP8 GEMMs over the bf16 model.
// Its embeddings must differ from bf16's (the FP8 path ran, not a bf16 fallback) and stay near
// the fp32 reference (E4M3 keeps 3 mantissa bits: a few percent per tensor, not bf16's 0.4%).
TEST(CudaInfer, Fp8EmbeddingsStayNearTheFp32Reference) {
  const SequenceDataset data = proteins();
  const std::string dir = fixture("esm2_tiny");
  const ModelFamily& fam = family_of_dir(dir);
  EmbedOptions o;
  o.pooling = Pooling::Mean;
  o.window_tokens = 1024;
  o.max_tokens = 4096;
  auto run = [&](Device dev, InferencePrecision p) {
    auto model = load_model(fam, dir, dev, p);
    EmbedOptions op = o;
    op.layers = {int(model->dims().layers)};
    op.act_dtype = p.params == Precision::F32 ? DType::F32 : DType::BF16;
    return Embedder(*model, fam.tokenizer(), op, false).run(data, 0, data.size()).pooled.at(0);
  };
  const Tensor ref = run(Device::CPU, {Precision::F32, false});
  const Tensor bf16 = run(Device::CUDA, {Precision::Bf16, false});
  const Tensor fp8 = run(Device::CUDA, {Precision::Bf16, true});
  ASSERT_EQ(fp8.numel(), ref.numel());
  int64_t differ = 0;
  for (int64_t i = 0; i < fp8.numel(); ++i) differ += fp8.f32()[i] != bf16.f32()[i];
  EXPECT_GT(differ, fp8.numel() / 2) << "FP8 embeddings equal bf16's: the FP8 GEMMs did not run";
  const int64_t R = ref.size(0), C = ref.size(1);
  double min_cos = 1;
  for (int64_t r = 0; r < R; ++r) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double x = fp8.f32()[r * C + c], y = ref.f32()[r * C + c];
      ab += x * y, aa += x * x, bb += y * y;
    }
    min_cos = std::min(min_cos, ab / std::sqrt(aa * bb));
  }
  std::printf("fp8 embeddings: max rel error %.3g (bf16 %.3g), min cosine %.6f, over %lld proteins\n",
              rel_err(fp8, ref), rel_err(bf16, ref), min_cos, (long long)R);
  EXPECT_LT(rel_err(fp8, ref), 0.15);
  EXPECT_GT(min_cos, 0.99);
}

TEST(CudaInfer, ScoresMatchTheCpu) {
  SequenceDataset data;
  data.add("MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ", "a");
  data.add("GWTLNSAGYLLGPHAVGNHRSFSDKNGLTS", "b");
  auto cpu = load_model_dir(fixture("esm2_tiny"), Device::CPU);
  const Tokenizer& tok = family_of_dir(fixture("esm2_tiny")).tokenizer();
  const auto ref = pseudo_log_likelihoods(*cpu, tok, data, 0, 2, {});
  for (Precision p : {Precision::F32, Precision::Bf16}) {
    auto gpu = load_model_dir(fixture("esm2_tiny"), Device::CUDA, p);
    const auto got = pseudo_log_likelihoods(*gpu, tok, data, 0, 2, {});
    const double tol = p == Precision::F32 ? 1e-4 : 2e-2;
    for (size_t r = 0; r < 2; ++r) EXPECT_NEAR(got[r].pll, ref[r].pll, tol * std::fabs(ref[r].pll)) << precision_name(p);
  }
  SequenceDataset dna;
  dna.add("ACGTTGCAAGGCTTAACGATCGATCGGATCCATGCAGTCAGTACGATCGATCGTAGC", "c");
  auto lcpu = load_model_dir(fixture("llama_tiny"), Device::CPU);
  const Tokenizer& ntok = family_of_dir(fixture("llama_tiny")).tokenizer();
  CausalOptions o;
  o.window_tokens = 20;
  o.stride = 5;
  o.per_base = true;
  const auto lref = causal_log_likelihoods(*lcpu, ntok, dna, 0, 1, o);
  auto lgpu = load_model_dir(fixture("llama_tiny"), Device::CUDA, Precision::F32);
  const auto lgot = causal_log_likelihoods(*lgpu, ntok, dna, 0, 1, o);
  EXPECT_EQ(lgot[0].scored, lref[0].scored);
  for (size_t i = 0; i < lref[0].base_ll.size(); ++i)
    if (!std::isnan(lref[0].base_ll[i])) EXPECT_NEAR(lgot[0].base_ll[i], lref[0].base_ll[i], 1e-4) << i;
}
