// FP8 on the GPU: the quantization kernels code for code against the CPU reference, the FP8
// linear layers (cuBLASLt on Hopper) against the CPU's quantize-then-fp32 reference, and FP8
// training of ESM-2 and Llama against bf16 training from the same init and data (the
// recipes' FP8-vs-bf16 loss tolerance: rtol 0.05).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

#include "biofm/core/device_memory_stats.h"
#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/models/esm2/model.h"
#include "biofm/models/llama/model.h"
#include "biofm/ops/activation/op.h"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/norm/op.h"
#include "biofm/ops/rope/op.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/schedule.h"
#include "cuda_test_util.h"
#include "small_models.h"

using namespace biofm;
using namespace biofm::cudatest;
using ops::Fp8Recipe;
using ops::Fp8Type;

namespace {

std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

std::vector<uint8_t> bytes_of(const Tensor& t) {
  cuda_ctx::synchronize();
  Tensor h = t.to(Device::CPU);
  const uint8_t* p = static_cast<const uint8_t*>(h.raw());
  return std::vector<uint8_t>(p, p + h.numel());
}

}  // namespace

TEST(CudaFp8, QuantizeMatchesCpuCodeForCode) {
  BIOFM_REQUIRE_GPU();
  // Shapes that are not multiples of the 64 x 64 tile, one tile and several in each direction; the
  // third has whole tile rows of q_t's zero padding (rows 128 to 207) under whole tiles of x, so all
  // three launches of the kernel (inside tiles, the column strip, the row strip) have work.
  for (auto [R, C, Rp] : {std::tuple<int64_t, int64_t, int64_t>{100, 80, 112}, {300, 272, 304}, {128, 80, 208}})
  for (DType dt : {DType::F32, DType::BF16})
    for (Fp8Type t : {Fp8Type::E4M3, Fp8Type::E5M2}) {
      SCOPED_TRACE(std::string(dtname(dt)) + " " + ops::fp8_type_name(t) + " R=" + std::to_string(R));
      Tensor x = round_to(randn({R, C}, 21, 0.01f), dt);  // small values: the scale must lift them
      Tensor q = Tensor::empty({R, C}, DType::U8), qt = Tensor::empty({C, Rp}, DType::U8);
      Tensor s = Tensor::empty({1}, DType::F32);
      ops::fp8_quantize(q, qt, s, x, t);
      Tensor dq = Tensor::empty({R, C}, DType::U8, Device::CUDA), dqt = Tensor::empty({C, Rp}, DType::U8, Device::CUDA);
      Tensor ds = Tensor::empty({1}, DType::F32, Device::CUDA), none;
      ops::fp8_quantize(dq, dqt, ds, to_device(x, dt), t);
      EXPECT_EQ(to_host_f32(ds).f32()[0], s.f32()[0]);
      const std::vector<uint8_t> a = bytes_of(dq), at = bytes_of(dqt);
      EXPECT_EQ(std::memcmp(a.data(), q.raw(), a.size()), 0) << "row-major codes differ";
      EXPECT_EQ(std::memcmp(at.data(), qt.raw(), at.size()), 0) << "transposed codes differ";
      // Transposed only (the weight-gradient operand) gives the same codes.
      Tensor dqt2 = Tensor::empty({C, Rp}, DType::U8, Device::CUDA);
      ops::fp8_quantize(none, dqt2, ds, to_device(x, dt), t);
      EXPECT_EQ(bytes_of(dqt2), at);
      // With the column sums (an output gradient's bias gradient): the same codes, and the sums of
      // x's columns (one partial row per tile row, the padding rows' zeros included).
      Tensor dsums = Tensor::zeros({C}, DType::F32, Device::CUDA);
      Tensor dq3 = Tensor::empty({R, C}, DType::U8, Device::CUDA), dqt3 = Tensor::empty({C, Rp}, DType::U8, Device::CUDA);
      ops::fp8_quantize(dq3, dqt3, ds, to_device(x, dt), t, Tensor(), dsums);
      EXPECT_EQ(bytes_of(dq3), a);
      EXPECT_EQ(bytes_of(dqt3), at);
      const Tensor sums = to_host_f32(dsums);
      for (int64_t c = 0; c < C; ++c) {
        double want = 0;
        for (int64_t r = 0; r < R; ++r) want += x.f32()[r * C + c];
        ASSERT_NEAR(sums.f32()[c], want, 1e-5 * (1 + std::fabs(want))) << "column " << c;
      }
    }
}

// A non-finite input becomes the NaN code (as on the CPU), so an overflow reaches the loss.
TEST(CudaFp8, NonFiniteInputsGiveNaNCodes) {
  BIOFM_REQUIRE_GPU();
  Tensor x = randn({4, 16}, 23);
  x.f32()[5] = INFINITY;
  x.f32()[9] = NAN;
  Tensor q = Tensor::empty({4, 16}, DType::U8), s = Tensor::empty({1}, DType::F32), none;
  ops::fp8_quantize(q, none, s, x, Fp8Type::E4M3);
  Tensor dq = Tensor::empty({4, 16}, DType::U8, Device::CUDA), ds = Tensor::empty({1}, DType::F32, Device::CUDA);
  ops::fp8_quantize(dq, none, ds, to_device(x, DType::F32), Fp8Type::E4M3);
  const std::vector<uint8_t> codes = bytes_of(dq);
  EXPECT_EQ(codes[5], 0x7f);
  EXPECT_EQ(codes[9], 0x7f);
  EXPECT_EQ(std::memcmp(codes.data(), q.raw(), codes.size()), 0);
}

// bf16 activations: the GPU FP8 GEMMs against the CPU reference on the same bf16 values. The
// codes are the same on both sides, so what differs is fp32 accumulation order (and the
// forward's fast accumulation) and the bf16 rounding of out and dx.
TEST(CudaFp8, LinearMatchesCpuReference) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 100, I = 64, O = 96;  // N not a multiple of 16: the weight gradient pads
  const DType bf = DType::BF16;
  Tensor x = round_to(randn({N, I}, 31), bf), w = round_to(randn({O, I}, 32, 0.1f), bf);
  Tensor b = round_to(randn({O}, 33), bf), res = round_to(randn({N, O}, 34), bf);
  Tensor dout = round_to(randn({N, O}, 35, 1e-3f), bf), dw0 = randn({O, I}, 36, 1e-3f), db0 = randn({O}, 37, 1e-3f);
  Fp8Recipe recipe;

  Tensor out = Tensor::empty({N, O}, DType::F32);
  ops::linear_forward_fp8(out, x, w, b, res, recipe);
  Tensor d_out = Tensor::empty({N, O}, bf, Device::CUDA);
  poison(d_out);
  ops::linear_forward_fp8(d_out, to_device(x, bf), to_device(w, bf), to_device(b, bf), to_device(res, bf), recipe);
  EXPECT_TRUE(close("out", to_host_f32(d_out), out, tol(bf)));

  Tensor dx = Tensor::empty({N, I}, DType::F32), dw = dw0.clone(), db = db0.clone();
  ops::linear_backward_fp8(dx, dw, db, dout, x, w, recipe);
  Tensor d_dx = Tensor::empty({N, I}, bf, Device::CUDA);
  poison(d_dx);
  Tensor d_dw = dw0.to(Device::CUDA), d_db = db0.to(Device::CUDA);
  ops::linear_backward_fp8(d_dx, d_dw, d_db, to_device(dout, bf), to_device(x, bf), to_device(w, bf), recipe);
  EXPECT_TRUE(close("dx", to_host_f32(d_dx), dx, tol(bf)));
  EXPECT_TRUE(close("dw", minus(to_host_f32(d_dw), dw0), minus(dw, dw0), tol(bf)));
  EXPECT_TRUE(close("dbias", minus(to_host_f32(d_db), db0), minus(db, db0), 1e-5));

  // The FP8 result really is FP8: it differs from the bf16 GEMM by about FP8's resolution.
  Tensor d_bf = Tensor::empty({N, O}, bf, Device::CUDA);
  ops::linear_forward(d_bf, to_device(x, bf), to_device(w, bf), to_device(b, bf), to_device(res, bf));
  const double e = rel_error(to_host_f32(d_out), to_host_f32(d_bf));
  EXPECT_GT(e, 1e-3);
  EXPECT_LT(e, 5e-2);
}

// The codes kept by forward (xᵀ in Fp8SavedInput, wᵀ in Fp8WeightCodes) are the ones backward
// would make itself: both gradients through them are bit for bit the same.
TEST(CudaFp8, SavedInputCodesGiveTheSameWeightGradient) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 100, I = 64, O = 96;
  const DType bf = DType::BF16;
  Tensor x = to_device(randn({N, I}, 51), bf), w = to_device(randn({O, I}, 52, 0.1f), bf);
  Tensor dout = to_device(randn({N, O}, 53, 1e-3f), bf), none;
  Tensor out = Tensor::empty({N, O}, bf, Device::CUDA);
  ops::Fp8SavedInput saved;
  ops::Fp8WeightCodes w_codes;
  ops::linear_forward_fp8(out, x, w, none, none, Fp8Recipe{}, &saved, none, &w_codes);
  ASSERT_TRUE(saved.codes_t.defined());
  EXPECT_EQ(saved.codes_t.shape(), (Shape{I, 112}));
  Tensor dw_saved = Tensor::zeros({O, I}, DType::F32, Device::CUDA), dw = Tensor::zeros({O, I}, DType::F32, Device::CUDA);
  EXPECT_EQ(w_codes.codes_t.shape(), (Shape{I, O}));
  Tensor dx_saved = Tensor::empty({N, I}, bf, Device::CUDA), dx = Tensor::empty({N, I}, bf, Device::CUDA);
  poison(dx_saved);  // (NaN: equal results below mean both were written)
  poison(dx);
  ops::linear_backward_fp8(dx_saved, dw_saved, none, dout, x, w, Fp8Recipe{}, &saved, none, &w_codes);
  ops::linear_backward_fp8(dx, dw, none, dout, x, w, Fp8Recipe{});
  EXPECT_EQ(rel_error(to_host_f32(dw_saved), to_host_f32(dw)), 0.0);
  EXPECT_TRUE(all_finite(to_host_f32(dx_saved)) && all_finite(to_host_f32(dx)));
  EXPECT_EQ(rel_error(to_host_f32(dx_saved), to_host_f32(dx)), 0.0);

  // The weight gradient's FP8 GEMM has an algorithm here, so the codes replace x: backward
  // without x gives the same bits.
  EXPECT_TRUE(saved.replaces_x);
  Tensor dw_nox = Tensor::zeros({O, I}, DType::F32, Device::CUDA), dx_nox = Tensor::empty({N, I}, bf, Device::CUDA);
  poison(dx_nox);
  ops::linear_backward_fp8(dx_nox, dw_nox, none, dout, none, w, Fp8Recipe{}, &saved, none, &w_codes);
  EXPECT_EQ(rel_error(to_host_f32(dw_nox), to_host_f32(dw)), 0.0);
  EXPECT_EQ(rel_error(to_host_f32(dx_nox), to_host_f32(dx)), 0.0);
  // Without codes that replace it, x cannot be left out.
  ops::Fp8SavedInput not_replacing = saved;
  not_replacing.replaces_x = false;
  EXPECT_THROW(ops::linear_backward_fp8(dx_nox, dw_nox, none, dout, none, w, Fp8Recipe{}, &not_replacing), Error);
  EXPECT_THROW(ops::linear_backward_fp8(dx_nox, dw_nox, none, dout, none, w, Fp8Recipe{}), Error);
}

// Weight codes kept across calls (Fp8WeightCodes) give what quantizing w again gives.
TEST(CudaFp8, CachedWeightCodesGiveTheSameResults) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 48, I = 64, O = 32;
  const DType bf = DType::BF16;
  Tensor x = to_device(randn({N, I}, 81), bf), w = to_device(randn({O, I}, 82, 0.1f), bf);
  Tensor dout = to_device(randn({N, O}, 83, 1e-3f), bf), none;
  ops::Fp8WeightCodes cache;
  Tensor a = Tensor::empty({N, O}, bf, Device::CUDA), b = Tensor::empty({N, O}, bf, Device::CUDA);
  poison(a);  // (NaN: equal results below mean both were written)
  poison(b);
  ops::linear_forward_fp8(a, x, w, none, none, Fp8Recipe{}, nullptr, none, &cache);  // fills it
  ASSERT_TRUE(cache.codes.defined() && cache.codes_t.defined());
  ops::linear_forward_fp8(b, x, w, none, none, Fp8Recipe{}, nullptr, none, &cache);  // uses it
  EXPECT_TRUE(all_finite(to_host_f32(a)) && all_finite(to_host_f32(b)));
  EXPECT_EQ(rel_error(to_host_f32(a), to_host_f32(b)), 0.0);
  Tensor dx1 = Tensor::empty({N, I}, bf, Device::CUDA), dx2 = Tensor::empty({N, I}, bf, Device::CUDA);
  poison(dx1);
  poison(dx2);
  ops::linear_backward_fp8(dx1, none, none, dout, x, w, Fp8Recipe{});
  ops::linear_backward_fp8(dx2, none, none, dout, x, w, Fp8Recipe{}, nullptr, none, &cache);
  EXPECT_TRUE(all_finite(to_host_f32(dx1)) && all_finite(to_host_f32(dx2)));
  EXPECT_EQ(rel_error(to_host_f32(dx1), to_host_f32(dx2)), 0.0);
}

// An inference model's cache (forward_only) holds w's codes but not wᵀ's, with the same forward
// results; a backward that meets it quantizes wᵀ itself and gets what it would have anyway.
TEST(CudaFp8, ForwardOnlyWeightCodesKeepNoTransposedCopy) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 48, I = 64, O = 32;
  const DType bf = DType::BF16;
  Tensor x = to_device(randn({N, I}, 91), bf), w = to_device(randn({O, I}, 92, 0.1f), bf);
  Tensor dout = to_device(randn({N, O}, 93, 1e-3f), bf), none;
  ops::Fp8WeightCodes full, fwd;
  fwd.forward_only = true;
  Tensor a = Tensor::empty({N, O}, bf, Device::CUDA), b = Tensor::empty({N, O}, bf, Device::CUDA);
  poison(a);
  poison(b);
  ops::linear_forward_fp8(a, x, w, none, none, Fp8Recipe{}, nullptr, none, &full);
  ops::linear_forward_fp8(b, x, w, none, none, Fp8Recipe{}, nullptr, none, &fwd);
  ASSERT_TRUE(full.codes.defined() && full.codes_t.defined());
  ASSERT_TRUE(fwd.codes.defined());
  EXPECT_FALSE(fwd.codes_t.defined());
  EXPECT_TRUE(fwd.forward_only);
  EXPECT_TRUE(all_finite(to_host_f32(a)));
  EXPECT_EQ(rel_error(to_host_f32(a), to_host_f32(b)), 0.0);
  Tensor dx1 = Tensor::empty({N, I}, bf, Device::CUDA), dx2 = Tensor::empty({N, I}, bf, Device::CUDA);
  poison(dx1);
  poison(dx2);
  ops::linear_backward_fp8(dx1, none, none, dout, x, w, Fp8Recipe{}, nullptr, none, &full);
  ops::linear_backward_fp8(dx2, none, none, dout, x, w, Fp8Recipe{}, nullptr, none, &fwd);
  EXPECT_TRUE(all_finite(to_host_f32(dx1)));
  EXPECT_EQ(rel_error(to_host_f32(dx1), to_host_f32(dx2)), 0.0);
}

// Every producer's amax output (SwiGLU and GELU forward/backward, RMSNorm / LayerNorm forward and
// backward with the residual gradient, the inverse rope pass over q|k|v) is max |value| of what it
// stored, exactly, and quantizing with it gives the codes the quantization's own amax pass gives.
TEST(CudaFp8, ProducerAmaxFeedsTheQuantization) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 70, F = 96;
  const DType bf = DType::BF16;
  Tensor gate_up = to_device(randn({N, 2 * F}, 61, 2.0f), bf), dh = to_device(randn({N, F}, 62, 1e-3f), bf);
  Tensor h = Tensor::empty({N, F}, bf, Device::CUDA), dgu = Tensor::empty({N, 2 * F}, bf, Device::CUDA);
  Tensor h_amax = Tensor::empty({1}, DType::F32, Device::CUDA), dgu_amax = Tensor::empty({1}, DType::F32, Device::CUDA);
  poison(h_amax);
  poison(dgu_amax);
  ops::swiglu_forward_packed(h, gate_up, h_amax);
  ops::swiglu_backward_packed(dgu, dh, gate_up, dgu_amax);
  Tensor x = to_device(randn({N, F}, 63, 3.0f), bf), nw = to_device(randn({F}, 64), bf);
  Tensor n = Tensor::empty({N, F}, bf, Device::CUDA), rstd = Tensor::empty({N}, DType::F32, Device::CUDA);
  Tensor n_amax = Tensor::empty({1}, DType::F32, Device::CUDA);
  poison(n_amax);
  ops::rmsnorm_forward(n, rstd, x, nw, 1e-5f, n_amax);
  auto amax_slot = [] {
    Tensor a = Tensor::empty({1}, DType::F32, Device::CUDA);
    poison(a);
    return a;
  };
  auto like = [&](const Tensor& t) { return Tensor::empty(t.shape(), bf, Device::CUDA); };
  // GELU forward / backward (backward in place, as the MLP runs it)
  Tensor pre = to_device(randn({N, F}, 65, 2.0f), bf), g = like(pre), g_amax = amax_slot();
  ops::gelu_forward(g, pre, ops::GeluKind::Erf, g_amax);
  Tensor dg = to_device(randn({N, F}, 66, 1e-2f), bf), dg_amax = amax_slot();
  ops::gelu_backward(dg, dg, pre, ops::GeluKind::Erf, dg_amax);
  // LayerNorm forward; LayerNorm and RMSNorm backward with the residual gradient folded in
  Tensor lb = to_device(randn({F}, 67), bf), ln = like(x), mean = Tensor::empty({N}, DType::F32, Device::CUDA);
  Tensor lrstd = Tensor::empty({N}, DType::F32, Device::CUDA), ln_amax = amax_slot(), none;
  ops::layernorm_forward(ln, mean, lrstd, x, nw, lb, 1e-5f, ln_amax);
  Tensor dy = to_device(randn({N, F}, 68), bf), dres = to_device(randn({N, F}, 69, 3.0f), bf);
  Tensor ldx = like(x), ldx_amax = amax_slot(), rdx = like(x), rdx_amax = amax_slot();
  ops::layernorm_backward(ldx, none, none, dy, x, nw, mean, lrstd, dres, ldx_amax);
  ops::rmsnorm_backward(rdx, none, dy, x, nw, rstd, dres, rdx_amax);
  // the inverse rope pass over a packed q|k|v gradient (2 query, 1 key/value heads of 32)
  const int64_t D = 32;
  std::vector<float> f(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) f[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / float(D));
  std::vector<int32_t> p(N);
  for (int64_t i = 0; i < N; ++i) p[size_t(i)] = int32_t(i % 23);
  Tensor dqkv = to_device(randn({N, 4 * D}, 70, 2.0f), bf), dqkv_amax = amax_slot();
  ops::rope_qk_packed(dqkv, Tensor::from_i32({N}, p).to(Device::CUDA), Tensor::from_f32({D / 2}, f).to(Device::CUDA),
                      2, 1, /*inverse=*/true, dqkv_amax);
  for (auto [t, amax, type] : {std::tuple{h, h_amax, Fp8Type::E4M3}, std::tuple{dgu, dgu_amax, Fp8Type::E5M2},
                               std::tuple{n, n_amax, Fp8Type::E4M3}, std::tuple{g, g_amax, Fp8Type::E4M3},
                               std::tuple{dg, dg_amax, Fp8Type::E5M2}, std::tuple{ln, ln_amax, Fp8Type::E4M3},
                               std::tuple{ldx, ldx_amax, Fp8Type::E5M2}, std::tuple{rdx, rdx_amax, Fp8Type::E5M2},
                               std::tuple{dqkv, dqkv_amax, Fp8Type::E5M2}}) {
    Tensor host = to_host_f32(t);
    EXPECT_EQ(to_host_f32(amax).f32()[0], float(testkit::max_abs(host)));
    const int64_t R = t.size(0), C = t.size(1);
    Tensor q1 = Tensor::empty({R, C}, DType::U8, Device::CUDA), q2 = Tensor::empty({R, C}, DType::U8, Device::CUDA);
    Tensor s1 = Tensor::empty({1}, DType::F32, Device::CUDA), s2 = Tensor::empty({1}, DType::F32, Device::CUDA), none;
    ops::fp8_quantize(q1, none, s1, t, type);
    ops::fp8_quantize(q2, none, s2, t, type, amax);
    EXPECT_EQ(bytes_of(q1), bytes_of(q2));
    EXPECT_EQ(to_host_f32(s1).f32()[0], to_host_f32(s2).f32()[0]);
  }
}

namespace {

// One model of ReleasingInputsKeepsTheGradientsAndSavesMemory: how to build it, a batch, and the
// names of its top layer's first MLP, second MLP and query weights.
struct ReleaseCase {
  const char* name;
  std::function<std::unique_ptr<LanguageModel>()> make;
  Batch batch;
  std::string fc1, fc2, q;
  int layers;
  int64_t hidden, ffn;
};

void expect_release_keeps_gradients(const ReleaseCase& rc) {
  for (bool delayed : {false, true}) {
    SCOPED_TRACE(std::string(rc.name) + (delayed ? ", delayed scaling" : ", current scaling"));
    struct Run {
      Tensor grads, fc1, fc2, q;
      float loss = 0;
      size_t peak = 0;
    };
    Run runs[3];  // inputs kept, kept again (the run-to-run noise), released
    for (int r = 0; r < 3; ++r) {
      testkit::ScopedOpOptions opt([&](ops::OpOptions& o) { o.fp8_release_inputs = r == 2; });
      std::unique_ptr<LanguageModel> m = rc.make();
      m->params().init(11);
      if (delayed) {
        ops::LayerQuant lq;
        lq.format = ops::LayerFormat::Fp8;
        lq.scaling = ops::Fp8Scaling::Delayed;
        m->set_layer_quant(std::vector<ops::LayerQuant>(size_t(rc.layers), lq));
      } else {
        m->set_fp8(Fp8Recipe{});
      }
      Tensor loss_acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
      m->params().zero_grad();
      cuda_ctx::synchronize();
      device_memory_reset_peak();
      m->forward_backward(rc.batch, 1e-3f, loss_acc);
      cuda_ctx::synchronize();
      Run& run = runs[r];
      run.peak = device_memory_stats().peak_allocated_bytes;
      run.loss = loss_acc.to(Device::CPU).f32()[0];
      run.grads = to_host_f32(m->params().grad_flat());
      run.fc1 = to_host_f32(m->params().grad(rc.fc1));
      run.fc2 = to_host_f32(m->params().grad(rc.fc2));
      run.q = to_host_f32(m->params().grad(rc.q));
    }
    const Run &kept = runs[0], &again = runs[1], &released = runs[2];
    EXPECT_TRUE(std::isfinite(kept.loss));
    EXPECT_EQ(released.loss, kept.loss);
    EXPECT_GT(rel_error(kept.fc1, Tensor::zeros(kept.fc1.shape(), DType::F32)), 0.0);  // not all zero
    // The top layer's MLP gradients come before any atomic add in backward: the same bits.
    EXPECT_EQ(rel_error(released.fc1, kept.fc1), 0.0) << "the top layer's first MLP gradient differs";
    EXPECT_EQ(rel_error(released.fc2, kept.fc2), 0.0) << "the top layer's second MLP gradient differs";
    // Its query projection's (input released too) and everything below: within the noise.
    const double noise = rel_error(again.grads, kept.grads), diff = rel_error(released.grads, kept.grads);
    const double q_noise = rel_error(again.q, kept.q), q_diff = rel_error(released.q, kept.q);
    std::printf("[fp8 release inputs] %s %s: gradients vs kept %.2e (kept vs kept %.2e), top query %.2e (%.2e); "
                "peak %.1f MiB kept, %.1f MiB released\n",
                rc.name, delayed ? "delayed" : "current", diff, noise, q_diff, q_noise,
                double(again.peak) / (1 << 20), double(released.peak) / (1 << 20));
    EXPECT_LE(diff, std::max(4 * noise, 1e-3));
    EXPECT_LE(q_diff, std::max(4 * q_noise, 1e-3));
    // Per layer, the two norm outputs (T·H bf16 each) and the activation (T·F) are no longer
    // held through backward: at least half of that must show in the peak (against the second
    // kept run: the first may hold one-time allocations). ESM-2's GELU activation under
    // DelayedScaling is never stored in either run (ops.fp8_gelu_codes): only the norms count.
    const bool act_never_stored = delayed && std::string(rc.name) == "esm2" && ops::op_options().fp8_gelu_codes;
    const double per_layer =
        double(rc.batch.num_rows()) * 2.0 * double(2 * rc.hidden + (act_never_stored ? 0 : rc.ffn));
    EXPECT_LT(double(released.peak), double(again.peak) - 0.5 * per_layer * double(rc.layers));
  }
}

}  // namespace

// ops.fp8_release_inputs: an FP8 training step that drops the norms' outputs and the MLP
// activation after forward (their FP8 codes serve backward) computes the same loss and
// gradients as one that keeps them, in less memory: ESM-2 (GELU MLP) and Llama (SwiGLU), current
// and delayed scaling. Below the top layer's attention the gradients are compared with the
// run-to-run noise only: cuDNN's attention backward and the embedding backward add with atomics.
TEST(CudaFp8, ReleasingInputsKeepsTheGradientsAndSavesMemory) {
  BIOFM_REQUIRE_GPU();
  const Esm2Config ec = small_esm2_config();
  const std::string etop = "esm.encoder.layer.2.";
  expect_release_keeps_gradients({"esm2", [&] { return std::make_unique<Esm2Model>(ec, Device::CUDA, Precision::Bf16Mixed); },
                                  protein_batches(1)[0], etop + "intermediate.dense.weight",
                                  etop + "output.dense.weight", etop + "attention.self.query.weight", 3, 256, 1024});
  const LlamaConfig lc = small_llama_config();
  const std::string ltop = "model.layers.2.";
  expect_release_keeps_gradients({"llama", [&] { return std::make_unique<LlamaModel>(lc, Device::CUDA, Precision::Bf16Mixed); },
                                  dna_batches(1)[0], ltop + "mlp.gate_proj.weight", ltop + "mlp.down_proj.weight",
                                  ltop + "self_attn.q_proj.weight", 3, 128, 512});
}

// Sizes FP8 GEMMs cannot take (features not multiples of 16) run the bf16 GEMMs instead.
TEST(CudaFp8, OddFeatureCountsFallBackToBf16) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 10, I = 24, O = 20;
  const DType bf = DType::BF16;
  Tensor x = to_device(randn({N, I}, 41), bf), w = to_device(randn({O, I}, 42), bf), none;
  Tensor a = Tensor::empty({N, O}, bf, Device::CUDA), b = Tensor::empty({N, O}, bf, Device::CUDA);
  poison(a);
  poison(b);
  ops::linear_forward_fp8(a, x, w, none, none, Fp8Recipe{});
  ops::linear_forward(b, x, w, none);
  EXPECT_TRUE(all_finite(to_host_f32(a)) && all_finite(to_host_f32(b)));
  EXPECT_EQ(rel_error(to_host_f32(a), to_host_f32(b)), 0.0);
}

namespace {

// Mean loss per window of 20 steps over `steps` optimizer steps of `model` on `next()`.
template <class NextBatch>
std::vector<double> train_windows(LanguageModel& m, NextBatch next, int steps) {
  AdamWConfig ac;
  ac.lr = 2e-3f;
  AdamW opt(m.params(), ac);
  ScheduleSpec sched{"warmup_linear", 20, steps, 0.9, 0.1};
  Tensor loss_acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
  std::vector<double> windows(size_t(steps / 20), 0.0);
  for (int s = 0; s < steps; ++s) {
    Batch hb = next();
    m.params().zero_grad();
    loss_acc.zero_();
    m.forward_backward(hb.to(Device::CUDA), 1.0f / float(hb.num_label_tokens), loss_acc);
    opt.step(float(ac.lr * lr_multiplier(sched, s)));
    windows[size_t(s / 20)] += double(loss_acc.to(Device::CPU).f32()[0]) / double(hb.num_label_tokens) / 20.0;
  }
  return windows;
}

// 200 steps of Model(c) from one init on one data stream, bf16 then FP8: the loss curves agree
// within the recipes' FP8-vs-bf16 rtol (0.05) per 20-step window, and the FP8 loss falls.
template <class Model, class Batcher, class Config, class Options>
void expect_fp8_tracks_bf16(const char* name, const Config& c, const SequenceDataset& data, const Options& o) {
  std::vector<double> curves[2];
  for (int fp8 = 0; fp8 < 2; ++fp8) {
    Model m(c, Device::CUDA, Precision::Bf16Mixed);
    m.params().init(7);
    if (fp8) m.set_fp8(Fp8Recipe{});
    Batcher batcher(data, o);
    curves[fp8] = train_windows(m, [&] { return batcher.next(); }, 200);
  }
  const std::vector<double>& bf16 = curves[0];
  const std::vector<double>& fp8 = curves[1];
  for (size_t w = 0; w < bf16.size(); ++w) {
    const double rel = std::fabs(fp8[w] - bf16[w]) / bf16[w];
    std::printf("[fp8 curve %s] steps %3zu-%3zu  bf16 %.4f  fp8 %.4f  rel %.4f\n", name, w * 20 + 1, w * 20 + 20,
                bf16[w], fp8[w], rel);
    EXPECT_LT(rel, 0.05) << name << " window " << w;
  }
  EXPECT_LT(fp8.back(), fp8.front() - 0.2) << name << ": FP8 loss did not fall";
}

}  // namespace

// The weight codes a model keeps across micro batches are dropped when the optimizer changes
// the weights: logits after a step equal those of the same model with its cache cleared.
TEST(CudaFp8, WeightCodesAreRefreshedAfterAnOptimizerStep) {
  BIOFM_REQUIRE_GPU();
  LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 1;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 512;
  ReaderOptions ro;
  SequenceDataset data = SequenceDataset::load(src("data/dna_sample.fasta"), ro);
  CausalLmOptions co;
  co.max_seq_length = 256;
  co.max_tokens_per_batch = 1024;
  CausalLmBatcher batcher(data, co);
  const Batch b = batcher.next().to(Device::CUDA);
  LlamaModel m(c, Device::CUDA, Precision::Bf16Mixed);
  m.params().init(3);
  m.set_fp8(Fp8Recipe{});
  AdamWConfig ac;
  ac.lr = 1e-2f;
  AdamW opt(m.params(), ac);
  Tensor loss_acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
  const Tensor before = to_host_f32(m.logits(b));  // fills the weight-code cache
  m.params().zero_grad();
  m.forward_backward(b, 1e-3f, loss_acc);
  opt.step(ac.lr);
  const Tensor after = to_host_f32(m.logits(b));
  m.set_fp8(Fp8Recipe{});  // clears the cache: everything quantized again
  const Tensor fresh = to_host_f32(m.logits(b));
  EXPECT_GT(rel_error(after, before), 1e-3) << "the step should have changed the logits";
  EXPECT_EQ(rel_error(after, fresh), 0.0) << "stale FP8 weight codes after an optimizer step";
}

TEST(CudaFp8, Esm2TrainingTracksBf16) {
  BIOFM_REQUIRE_GPU();
  Esm2Config c;
  c.hidden_size = 128;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 2;
  c.intermediate_size = 512;
  ReaderOptions ro;
  SequenceDataset data = SequenceDataset::load(src("data/proteins_sample.fasta"), ro);
  MlmOptions mo;
  mo.max_seq_length = 256;
  mo.max_tokens_per_batch = 4096;
  expect_fp8_tracks_bf16<Esm2Model, MlmBatcher>("esm2", c, data, mo);
}

TEST(CudaFp8, LlamaTrainingTracksBf16) {
  BIOFM_REQUIRE_GPU();
  LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 128;
  c.intermediate_size = 512;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 1024;
  ReaderOptions ro;
  SequenceDataset data = SequenceDataset::load(src("data/dna_sample.fasta"), ro);
  CausalLmOptions co;
  co.max_seq_length = 1024;
  co.max_tokens_per_batch = 4096;
  expect_fp8_tracks_bf16<LlamaModel, CausalLmBatcher>("llama", c, data, co);
}
