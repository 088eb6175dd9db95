// FP8 delayed scaling on the GPU: the history/scale update kernel and the amax recording bit for
// bit against the CPU reference (ops/fp8/delayed.h); a model's delayed-scaling state after a few
// steps against the CPU's; DelayedScaling training (all layers, and layer-wise) against bf16
// within the recipes' tolerance (rtol 0.05 per 20-step window); the MLP's GELU inside the
// quantization (fp8_quantize_gelu) against the GELU kernel then the quantization; the norms
// writing the codes (layernorm_forward_fp8 / rmsnorm_forward_fp8) against the norm kernel then
// the quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>

#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/models/llama/model.h"
#include "biofm/ops/activation/op.h"
#include "biofm/ops/fp8/delayed.h"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/norm/op.h"
#include "biofm/ops/options.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/schedule.h"
#include "cuda_test_util.h"
#include "recipe_curve.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

// A GPU tensor's bytes as stored.
std::vector<uint8_t> bytes(const Tensor& t) {
  cuda_ctx::synchronize();
  Tensor h = t.to(Device::CPU);
  const uint8_t* p = static_cast<const uint8_t*>(h.raw());
  return std::vector<uint8_t>(p, p + h.numel() * int64_t(dtype_size(h.dtype())));
}

std::vector<uint32_t> bits_of(const Tensor& t) {
  cuda_ctx::synchronize();
  Tensor h = t.device() == Device::CPU ? t : t.to(Device::CPU);
  std::vector<uint32_t> b(size_t(h.numel()));
  std::memcpy(b.data(), h.f32(), b.size() * 4);
  return b;
}

ops::LayerQuant delayed(int history) {
  ops::LayerQuant q;
  q.format = ops::LayerFormat::Fp8;
  q.scaling = ops::Fp8Scaling::Delayed;
  q.delayed.amax_history_len = history;
  return q;
}

LlamaConfig tiny_llama(int layers) {
  LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 128;
  c.intermediate_size = 512;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 1024;
  return c;
}

}  // namespace

TEST(CudaFp8Delayed, UpdateMatchesCpuBitForBit) {
  BIOFM_REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int L : {1, 5, 1024})
    for (int margin : {0, 3})
      for (bool use_max : {true, false}) {
        const int N = 37;
        Tensor h = randn({N, L}, uint64_t(L + margin), 10.0f), s = randn({N}, 99, 100.0f);
        for (int64_t i = 0; i < h.numel(); ++i) h.f32()[i] = std::fabs(h.f32()[i]);
        for (int64_t i = 0; i < N; ++i) s.f32()[i] = std::fabs(s.f32()[i]);
        h.f32()[0] = 0.0f;         // row 0: a zero step
        h.f32()[L] = inf;          // row 1: an overflow
        h.f32()[2 * L] = nan;      // row 2: a NaN
        for (int i = 0; i < L; ++i) h.f32()[3 * L + i] = 0.0f;  // row 3: nothing recorded yet
        Tensor hd = h.to(Device::CUDA), sd = s.to(Device::CUDA);
        for (int rep = 0; rep < 3; ++rep) {  // several steps: the rolled state feeds the next update
          ops::fp8_delayed_update(h, s, margin, use_max);
          ops::fp8_delayed_update(hd, sd, margin, use_max);
        }
        EXPECT_EQ(bits_of(hd), bits_of(h)) << "L=" << L << " margin=" << margin << " max=" << use_max;
        EXPECT_EQ(bits_of(sd), bits_of(s)) << "L=" << L << " margin=" << margin << " max=" << use_max;
      }
}

TEST(CudaFp8Delayed, RecordMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t n : {int64_t(1), int64_t(1000003)}) {
      Tensor x = round_to(randn({n}, uint64_t(n), 3.0f), dt);
      Tensor h = Tensor::from_f32({3}, {0.5f, 7.0f, 7.0f});
      Tensor hd = h.to(Device::CUDA), xd = to_device(randn({n}, uint64_t(n), 3.0f), dt);
      ops::fp8_amax_record(h, x);
      ops::fp8_amax_record(hd, xd);
      EXPECT_EQ(bits_of(hd), bits_of(h)) << dtname(dt) << " n=" << n;
      // a producer's amax, and a NaN (an overflow upstream) that must win
      Tensor a = Tensor::from_f32({1}, {1e4f}), an = Tensor::from_f32({1}, {std::nanf("")});
      ops::fp8_amax_record(h, Tensor(), a);
      ops::fp8_amax_record(hd, Tensor(), a.to(Device::CUDA));
      EXPECT_EQ(bits_of(hd)[0], bits_of(h)[0]);
      ops::fp8_amax_record(hd, Tensor(), an.to(Device::CUDA));
      EXPECT_TRUE(std::isnan(hd.to(Device::CPU).f32()[0]));
      if (n == 1) continue;
      // A view off the 16-byte boundary (the scalar loop), and a NaN inside x (the vector loop).
      Tensor h2 = Tensor::from_f32({1}, {0.0f}), hd2 = h2.to(Device::CUDA);
      ops::fp8_amax_record(h2, x.flat_slice(1, {n - 1}));
      ops::fp8_amax_record(hd2, xd.flat_slice(1, {n - 1}));
      EXPECT_EQ(bits_of(hd2), bits_of(h2)) << dtname(dt) << " unaligned n=" << n;
      Tensor xn = randn({n}, uint64_t(n), 3.0f);
      xn.f32()[n / 2] = std::nanf("");
      Tensor hd3 = Tensor::zeros({1}, DType::F32, Device::CUDA);
      ops::fp8_amax_record(hd3, to_device(xn, dt));
      EXPECT_TRUE(std::isnan(hd3.to(Device::CPU).f32()[0])) << dtname(dt);
    }
}

// fp8_quantize with `record` (a weight's codes and its amax in one pass) writes the same codes as
// without it and the same history slot as fp8_amax_record; a NaN inside x wins.
TEST(CudaFp8Delayed, QuantizeRecordEqualsTheRecordOp) {
  BIOFM_REQUIRE_GPU();
  const std::tuple<int64_t, int64_t> shapes[] = {{1, 16}, {77, 48}, {1280, 5120}, {3840, 1280}};
  for (DType dt : {DType::F32, DType::BF16})
    for (auto [R, C] : shapes) {
      const Tensor x = to_device(randn({R, C}, uint64_t(R * C), 0.05f), dt);
      const Tensor scale_amax = Tensor::from_f32({1}, {0.2f}).to(Device::CUDA);
      Tensor hd1 = Tensor::from_f32({2}, {0.01f, 7.0f}).to(Device::CUDA), hd2 = hd1.clone();
      Tensor q1 = Tensor::empty({R, C}, DType::U8, Device::CUDA), q2 = q1.clone();
      Tensor qt1 = Tensor::empty({C, (R + 15) / 16 * 16}, DType::U8, Device::CUDA), qt2 = qt1.clone();
      Tensor s1 = Tensor::empty({1}, DType::F32, Device::CUDA), s2 = s1.clone();
      ops::fp8_quantize(q1, qt1, s1, x, ops::Fp8Type::E4M3, scale_amax, Tensor(), hd1);
      ops::fp8_amax_record(hd2, x);
      ops::fp8_quantize(q2, qt2, s2, x, ops::Fp8Type::E4M3, scale_amax);
      const std::string what = std::string(dtname(dt)) + " " + std::to_string(R) + "x" + std::to_string(C);
      EXPECT_EQ(bits_of(hd1), bits_of(hd2)) << what;
      EXPECT_EQ(bytes(q1), bytes(q2)) << what;
      EXPECT_EQ(bytes(qt1), bytes(qt2)) << what;
      EXPECT_EQ(bits_of(s1), bits_of(s2)) << what;
      Tensor xn = randn({R, C}, 5, 0.05f);
      xn.f32()[R * C / 2] = std::nanf("");
      Tensor none, hd3 = Tensor::zeros({1}, DType::F32, Device::CUDA);
      ops::fp8_quantize(q1, none, s1, to_device(xn, dt), ops::Fp8Type::E4M3, scale_amax, Tensor(), hd3);
      EXPECT_TRUE(std::isnan(hd3.to(Device::CPU).f32()[0])) << what;
      // A slot already above max |x| stays; with the column sums too.
      Tensor hd4 = Tensor::from_f32({1}, {1e3f}).to(Device::CUDA), sums = Tensor::zeros({C}, DType::F32, Device::CUDA);
      ops::fp8_quantize(q1, qt1, s1, x, ops::Fp8Type::E5M2, scale_amax, sums, hd4);
      EXPECT_EQ(hd4.to(Device::CPU).f32()[0], 1e3f) << what;
    }
}

// The same model, init and batches on CUDA (bf16) and the CPU (fp32): after three steps every
// tensor's recorded amax and delayed scale agree with the CPU's, and each Linear records into the
// same rows on both backends (a row's GPU amax is nearer its own CPU row than any CPU row that
// differs from it by more than 2x). Tolerances: inputs and weights 10% (bf16 vs fp32 drift);
// gradients 30%, since they come out of backward GEMMs on E5M2 codes (2 mantissa bits, steps of
// 12.5-25%) whose scales start at 1 (a rounding flip on one side moves the max by a whole step).
TEST(CudaFp8Delayed, ModelStateMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  const LlamaConfig c = tiny_llama(2);
  ReaderOptions ro;
  SequenceDataset data = SequenceDataset::load(src("data/dna_sample.fasta"), ro);
  CausalLmOptions co;
  co.max_seq_length = 512;
  co.max_tokens_per_batch = 2048;
  std::vector<float> hist[2], scales[2];
  for (int dev = 0; dev < 2; ++dev) {
    const Device d = dev ? Device::CUDA : Device::CPU;
    LlamaModel m(c, d, dev ? Precision::Bf16Mixed : Precision::F32);
    m.params().init(5);
    m.set_layer_quant({delayed(8), delayed(8)});
    AdamWConfig ac;
    ac.lr = 1e-3f;
    AdamW opt(m.params(), ac);
    CausalLmBatcher batcher(data, co);
    Tensor loss_acc = Tensor::zeros({1}, DType::F32, d);
    for (int s = 0; s < 3; ++s) {
      Batch hb = batcher.next();
      m.params().zero_grad();
      m.forward_backward(hb.to(d), 1.0f, loss_acc);  // summed token losses, as the trainer
      opt.step(ac.lr);
      m.quant_step_end();
    }
    const auto st = m.quant_state();
    ASSERT_EQ(st.size(), 2u);
    const Tensor h = st[0].second.to(Device::CPU), sc = st[1].second.to(Device::CPU);
    hist[dev].assign(h.f32(), h.f32() + h.numel());
    scales[dev].assign(sc.f32(), sc.f32() + sc.numel());
  }
  ASSERT_EQ(hist[0].size(), hist[1].size());
  const size_t L = 8, rows = hist[0].size() / L;  // row = (layer * 4 + projection) * 3 + role
  auto rtol = [](size_t row) { return row % 3 == 2 ? 0.3 : 0.1; };  // role 2: the output gradient
  int compared = 0;
  for (size_t i = 0; i < hist[0].size(); ++i) {
    EXPECT_NEAR(hist[1][i], hist[0][i], rtol(i / L) * hist[0][i] + 1e-6)
        << "history element " << i << " (row " << i / L << ", slot " << i % L << ")";
    compared += hist[0][i] > 0;
  }
  EXPECT_EQ(compared, 2 * 4 * 3 * 3) << "every tensor of both layers recorded three steps";
  for (size_t i = 0; i < scales[0].size(); ++i)
    EXPECT_NEAR(scales[1][i], scales[0][i], rtol(i) * scales[0][i]) << "scale row " << i;
  // Row mapping: slot L-1 holds the latest step's amax after the history rolled.
  auto latest = [&](int dev, size_t row) { return double(hist[dev][row * L + L - 1]); };
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < rows; ++j) {
      const double own = std::fabs(std::log(latest(1, i) / latest(0, i)));
      const double other = std::fabs(std::log(latest(1, i) / latest(0, j)));
      if (std::fabs(std::log(latest(0, j) / latest(0, i))) > std::log(2.0))
        EXPECT_LT(own, other) << "GPU row " << i << " is nearer CPU row " << j << " than its own";
    }
}

// DelayedScaling tracks bf16 within 5% per 20-step window on ESM-2 and the DNA Llama: the
// recipes' max-of-history default, most_recent with a margin, and layer-wise precision.
TEST(CudaFp8Delayed, TrainingTracksBf16) {
  BIOFM_REQUIRE_GPU();
  using testkit::expect_tracks, testkit::recipe_curve;
  const size_t L = testkit::kRecipeCurveLayers;
  for (const std::string family : {"esm2", "llama"}) {
    const std::vector<double> bf16 = recipe_curve(family, {});
    expect_tracks(family + " delayed all layers", recipe_curve(family, std::vector<ops::LayerQuant>(L, delayed(1024))),
                  bf16);
    ops::LayerQuant most_recent = delayed(16);
    most_recent.delayed.amax_compute_max = false;
    most_recent.delayed.margin = 1;
    expect_tracks(family + " delayed most_recent", recipe_curve(family, std::vector<ops::LayerQuant>(L, most_recent)),
                  bf16);
    // Layer-wise: first and last layers bf16 (the recipes' usual choice), the middle ones FP8
    // (one current scaling, one delayed).
    ops::LayerQuant current;
    current.format = ops::LayerFormat::Fp8;
    expect_tracks(family + " layer-wise",
                  recipe_curve(family, {ops::LayerQuant{}, current, delayed(1024), ops::LayerQuant{}}), bf16);
  }
}

// fp8_quantize_gelu (the ESM-2 MLP's GELU, or its gradient, computed inside the quantization of
// the next GEMM's operand) writes exactly what the GELU kernel followed by fp8_quantize writes:
// the same codes in both forms, scale, amax and column sums, bit for bit. Shapes with partial
// 64-row / 64-column tiles; a delayed scale small enough that some values saturate.
TEST(CudaFp8Delayed, GeluCodesEqualTheGeluKernelThenTheQuantization) {
  BIOFM_REQUIRE_GPU();
  for (auto [R, C] : {std::pair<int64_t, int64_t>{37, 64}, {130, 512}, {1000, 80}})
    for (ops::Fp8Type t : {ops::Fp8Type::E4M3, ops::Fp8Type::E5M2})
      for (bool grad : {false, true}) {
        const std::string what = std::to_string(R) + "x" + std::to_string(C) + " " + ops::fp8_type_name(t) +
                                 (grad ? " backward" : " forward");
        const Tensor pre = to_device(randn({R, C}, uint64_t(R + C), 2.0f), DType::BF16);
        const Tensor dact = grad ? to_device(randn({R, C}, 7, 0.01f), DType::BF16) : Tensor();
        const Tensor scale_amax = Tensor::from_f32({1}, {grad ? 0.004f : 1.5f}).to(Device::CUDA);
        const int64_t Rp = (R + 15) / 16 * 16;
        auto codes = [&] {
          return std::tuple{Tensor::empty({R, C}, DType::U8, Device::CUDA), Tensor::empty({C, Rp}, DType::U8, Device::CUDA),
                            Tensor::empty({1}, DType::F32, Device::CUDA), Tensor::zeros({1}, DType::F32, Device::CUDA),
                            Tensor::zeros({C}, DType::F32, Device::CUDA)};
        };
        auto [q, qt, s, amax, sums] = codes();  // the two kernels
        Tensor src = Tensor::empty({R, C}, DType::BF16, Device::CUDA);
        if (grad)
          ops::gelu_backward(src, dact, pre, ops::GeluKind::Erf, amax);
        else
          ops::gelu_forward(src, pre, ops::GeluKind::Erf, amax);
        ops::fp8_quantize(q, qt, s, src, t, scale_amax, sums);
        auto [fq, fqt, fs, seen, fsums] = codes();  // one
        const int64_t calls = ops::cuda::fp8_quantize_gelu_calls();
        ops::fp8_quantize_gelu(fq, fqt, fs, pre, dact, t, scale_amax, seen, fsums);
        EXPECT_EQ(ops::cuda::fp8_quantize_gelu_calls(), calls + 1);
        EXPECT_EQ(bytes(fq), bytes(q)) << what;
        EXPECT_EQ(bytes(fqt), bytes(qt)) << what;
        EXPECT_EQ(bytes(fs), bytes(s)) << what;
        EXPECT_EQ(bytes(seen), bytes(amax)) << what;
        EXPECT_EQ(bytes(fsums), bytes(sums)) << what;
        EXPECT_GT(amax.to(Device::CPU).f32()[0], 0.0f) << what;
        // The amax is max-folded into a history row's slot 0, not set: a larger earlier value
        // (another micro batch's) stays, and the other slots are not touched.
        Tensor row = Tensor::from_f32({2}, {1e3f, 3.0f}).to(Device::CUDA);
        ops::fp8_quantize_gelu(fq, fqt, fs, pre, dact, t, scale_amax, row);
        EXPECT_EQ(row.to(Device::CPU).f32()[0], 1e3f) << what;
        EXPECT_EQ(row.to(Device::CPU).f32()[1], 3.0f) << what;
      }
}

// The ESM-2 MLP under DelayedScaling takes that path in training (ops.fp8_gelu_codes, on by
// default) and trains as with the GELU kernels: the 200-step curves agree to 1e-3 relative per
// window (not bit for bit only because cuDNN's attention backward sums in a varying order).
TEST(CudaFp8Delayed, GeluCodesTrainAsTheGeluKernels) {
  BIOFM_REQUIRE_GPU();
  const std::vector<ops::LayerQuant> layers(testkit::kRecipeCurveLayers, delayed(1024));
  std::vector<double> curve[2];
  for (int on = 0; on < 2; ++on) {
    testkit::ScopedOpOptions opt([&](ops::OpOptions& o) { o.fp8_gelu_codes = on == 1; });
    const int64_t calls = ops::cuda::fp8_quantize_gelu_calls();
    curve[on] = testkit::recipe_curve("esm2", layers);
    if (on)
      EXPECT_GT(ops::cuda::fp8_quantize_gelu_calls(), calls);
    else
      EXPECT_EQ(ops::cuda::fp8_quantize_gelu_calls(), calls);
  }
  ASSERT_EQ(curve[0].size(), curve[1].size());
  for (size_t i = 0; i < curve[0].size(); ++i)
    EXPECT_NEAR(curve[1][i], curve[0][i], 1e-3 * std::fabs(curve[0][i])) << "window " << i;
}

// layernorm_forward_fp8 / rmsnorm_forward_fp8 (the norm writing the next GEMM's codes itself)
// write exactly what the norm kernel followed by fp8_quantize writes: both forms of the codes,
// scale, amax and the statistics, bit for bit. Row counts off the 16-row tiles, widths of every
// shipped model's norms (and one whose rows need 5 chunks per thread), bf16 and f32, transposed
// codes padded past the rows; a delayed scale small enough that some values saturate.
TEST(CudaFp8Delayed, NormCodesEqualTheNormKernelThenTheQuantization) {
  BIOFM_REQUIRE_GPU();
  struct Shape2 {
    int64_t N, C, pad;
  };
  for (Shape2 sh : {Shape2{37, 64, 0}, {1000, 1280, 0}, {130, 2048, 32}, {16, 320, 0}, {3, 4096, 0}, {0, 1280, 16}})
    for (ops::Fp8Type t : {ops::Fp8Type::E4M3, ops::Fp8Type::E5M2})
      for (bool rms : {false, true})
      for (DType dt : {DType::BF16, DType::F32}) {
        const int64_t N = sh.N, C = sh.C;
        const std::string what = std::to_string(N) + "x" + std::to_string(C) + " " + ops::fp8_type_name(t) +
                                 (rms ? " rmsnorm " : " layernorm ") + dtype_name(dt);
        const Tensor x = to_device(randn({N, C}, uint64_t(N + C), 2.0f), dt);
        const Tensor w = to_device(randn({C}, 5, 1.0f), dt), b = to_device(randn({C}, 6, 0.5f), dt);
        const Tensor scale_amax = Tensor::from_f32({1}, {2.5f}).to(Device::CUDA);
        const int64_t Np = (N + 15) / 16 * 16 + sh.pad;
        auto outputs = [&] {
          return std::tuple{Tensor::empty({N, C}, DType::U8, Device::CUDA), Tensor::empty({C, Np}, DType::U8, Device::CUDA),
                            Tensor::empty({1}, DType::F32, Device::CUDA), Tensor::zeros({1}, DType::F32, Device::CUDA),
                            Tensor::zeros({N}, DType::F32, Device::CUDA), Tensor::zeros({N}, DType::F32, Device::CUDA)};
        };
        auto [q, qt, s, amax, mean, rstd] = outputs();  // the two kernels
        Tensor y = Tensor::empty({N, C}, dt, Device::CUDA), none;
        if (rms)
          ops::rmsnorm_forward(y, rstd, x, w, 1e-6f, amax);
        else
          ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f, amax);
        ops::fp8_quantize(q, qt, s, y, t, scale_amax);
        auto [fq, fqt, fs, seen, fmean, frstd] = outputs();  // one
        const int64_t calls = ops::cuda::norm_forward_fp8_calls();
        if (rms)
          ops::rmsnorm_forward_fp8(fq, fqt, fs, frstd, x, w, 1e-6f, t, scale_amax, seen);
        else
          ops::layernorm_forward_fp8(fq, fqt, fs, fmean, frstd, x, w, b, 1e-5f, t, scale_amax, seen);
        EXPECT_EQ(ops::cuda::norm_forward_fp8_calls(), calls + 1);
        EXPECT_EQ(bytes(fq), bytes(q)) << what;
        EXPECT_EQ(bytes(fqt), bytes(qt)) << what;
        EXPECT_EQ(bytes(fs), bytes(s)) << what;
        EXPECT_EQ(bytes(seen), bytes(amax)) << what;
        EXPECT_EQ(bytes(frstd), bytes(rstd)) << what;
        if (!rms) EXPECT_EQ(bytes(fmean), bytes(mean)) << what;
        if (N > 0) {
          EXPECT_GT(amax.to(Device::CPU).f32()[0], 2.5f) << what << ": no value saturated";
        }
        // Max-folded into the history row's slot 0, not set (as for fp8_quantize_gelu).
        Tensor row = Tensor::from_f32({2}, {1e3f, 3.0f}).to(Device::CUDA);
        if (rms)
          ops::rmsnorm_forward_fp8(fq, fqt, fs, frstd, x, w, 1e-6f, t, scale_amax, row);
        else
          ops::layernorm_forward_fp8(fq, fqt, fs, fmean, frstd, x, w, b, 1e-5f, t, scale_amax, row);
        EXPECT_EQ(row.to(Device::CPU).f32()[0], 1e3f) << what;
        EXPECT_EQ(row.to(Device::CPU).f32()[1], 3.0f) << what;
      }
}

// Both recipe families under DelayedScaling take that path in training (ops.fp8_norm_codes, on
// by default) and train as with the norm kernels: the curves agree to 1e-3 relative per window
// (not bit for bit only because cuDNN's attention backward sums in a varying order).
TEST(CudaFp8Delayed, NormCodesTrainAsTheNormKernels) {
  BIOFM_REQUIRE_GPU();
  const std::vector<ops::LayerQuant> layers(testkit::kRecipeCurveLayers, delayed(1024));
  for (const std::string family : {"esm2", "llama"}) {
    std::vector<double> curve[2];
    for (int on = 0; on < 2; ++on) {
      testkit::ScopedOpOptions opt([&](ops::OpOptions& o) { o.fp8_norm_codes = on == 1; });
      const int64_t calls = ops::cuda::norm_forward_fp8_calls();
      curve[on] = testkit::recipe_curve(family, layers);
      if (on)
        EXPECT_GT(ops::cuda::norm_forward_fp8_calls(), calls) << family;
      else
        EXPECT_EQ(ops::cuda::norm_forward_fp8_calls(), calls) << family;
    }
    ASSERT_EQ(curve[0].size(), curve[1].size());
    for (size_t i = 0; i < curve[0].size(); ++i)
      EXPECT_NEAR(curve[1][i], curve[0][i], 1e-3 * std::fabs(curve[0][i])) << family << " window " << i;
  }
}
