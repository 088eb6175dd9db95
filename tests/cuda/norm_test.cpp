// CUDA LayerNorm / RMSNorm against the CPU reference (label "cuda": GPU machine only).
#include <gtest/gtest.h>

#include "biofm/ops/norm/op.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

struct NormCase {
  int64_t rows, C;
};
// Odd and model sizes; C = 33 and 1001 take the unvectorised path.
const std::vector<NormCase> kCases = {{1, 72},     {37, 320}, {4096, 1280}, {37, 2560}, {257, 5120},
                                      {4096, 320}, {37, 33},  {19, 1001},   {3, 8192}};

struct Inputs {
  Tensor x, w, b, dout, dw0, db0;  // F32 host, rounded to the dtypes under test
};

Inputs make_inputs(const NormCase& c, const DtypeCombo& dt, uint64_t seed, float shift) {
  Inputs in;
  in.x = randn({c.rows, c.C}, seed, 2.0f);
  for (int64_t i = 0; i < in.x.numel(); ++i) in.x.f32()[i] += shift;
  in.x = round_to(in.x, dt.act);
  in.w = randn({c.C}, seed + 1, 0.5f);
  for (int64_t i = 0; i < c.C; ++i) in.w.f32()[i] += 1.0f;
  in.w = round_to(in.w, dt.param);
  in.b = round_to(randn({c.C}, seed + 2, 0.5f), dt.param);
  in.dout = round_to(randn({c.rows, c.C}, seed + 3), dt.act);
  in.dw0 = randn({c.C}, seed + 4);
  in.db0 = randn({c.C}, seed + 5);
  return in;
}

std::string label(const char* op, const NormCase& c, const DtypeCombo& dt) {
  return std::string(op) + " " + combo_name(dt) + " [" + std::to_string(c.rows) + ", " +
         std::to_string(c.C) + "]";
}

}  // namespace

TEST(CudaNorm, LayerNormForwardBackwardMatchCpu) {
  BIOFM_REQUIRE_GPU();
  const float eps = 1e-5f;
  uint64_t seed = 100;
  for (const auto& c : kCases) {
    for (const auto& dt : dtype_combos()) {
      seed += 10;
      const Inputs in = make_inputs(c, dt, seed, 3.0f);
      const std::string L = label("layernorm", c, dt);
      // CPU reference on the rounded inputs.
      Tensor out_ref = Tensor::empty({c.rows, c.C}, DType::F32);
      Tensor mean_ref = Tensor::empty({c.rows}, DType::F32),
             rstd_ref = Tensor::empty({c.rows}, DType::F32);
      ops::cpu::layernorm_forward(out_ref, mean_ref, rstd_ref, in.x, in.w, in.b, eps);
      Tensor dx_ref = Tensor::empty({c.rows, c.C}, DType::F32);
      Tensor dw_ref = in.dw0.clone(), db_ref = in.db0.clone();
      ops::cpu::layernorm_backward(dx_ref, dw_ref, db_ref, in.dout, in.x, in.w, mean_ref, rstd_ref, Tensor());

      Tensor x = to_device(in.x, dt.act), w = to_device(in.w, dt.param),
             b = to_device(in.b, dt.param);
      Tensor out = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
      Tensor mean = Tensor::empty({c.rows}, DType::F32, Device::CUDA);
      Tensor rstd = Tensor::empty({c.rows}, DType::F32, Device::CUDA);
      poison(out);
      poison(mean);
      poison(rstd);
      ops::cuda::layernorm_forward(out, mean, rstd, x, w, b, eps);
      EXPECT_TRUE(close(L + " out", to_host_f32(out), out_ref, tol(dt.act)));
      EXPECT_TRUE(close(L + " mean", to_host_f32(mean), mean_ref, 1e-5));
      EXPECT_TRUE(close(L + " rstd", to_host_f32(rstd), rstd_ref, 1e-5));

      Tensor dout = to_device(in.dout, dt.act);
      Tensor dx = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
      poison(dx);
      Tensor dw = to_device(in.dw0, DType::F32), db = to_device(in.db0, DType::F32);
      ops::cuda::layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, Tensor());
      const double tp = dt.act == DType::F32 ? 1e-5 : 1e-4;  // F32 sums of identical inputs
      EXPECT_TRUE(close(L + " dx", to_host_f32(dx), dx_ref, tol(dt.act)));
      EXPECT_TRUE(close(L + " dw", to_host_f32(dw), dw_ref, tp));
      EXPECT_TRUE(close(L + " db", to_host_f32(db), db_ref, tp));
      EXPECT_TRUE(
          close(L + " dw increment", minus(to_host_f32(dw), in.dw0), minus(dw_ref, in.dw0), tp));
      EXPECT_TRUE(
          close(L + " db increment", minus(to_host_f32(db), in.db0), minus(db_ref, in.db0), tp));
    }
  }
}

TEST(CudaNorm, LayerNormOptionalTensorsAndAliasing) {
  BIOFM_REQUIRE_GPU();
  const float eps = 1e-5f;
  const NormCase c{37, 320};
  for (const auto& dt : dtype_combos()) {
    const Inputs in = make_inputs(c, dt, 7, 0.0f);
    const std::string L = label("layernorm", c, dt);
    Tensor none;
    // No bias, no saved statistics.
    Tensor out_ref = Tensor::empty({c.rows, c.C}, DType::F32);
    ops::cpu::layernorm_forward(out_ref, none, none, in.x, in.w, none, eps);
    Tensor x = to_device(in.x, dt.act), w = to_device(in.w, dt.param);
    Tensor out = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
    poison(out);
    ops::cuda::layernorm_forward(out, none, none, x, w, none, eps);
    EXPECT_TRUE(close(L + " out (no bias, no stats)", to_host_f32(out), out_ref, tol(dt.act)));

    Tensor mean_ref = Tensor::empty({c.rows}, DType::F32),
           rstd_ref = Tensor::empty({c.rows}, DType::F32);
    ops::cpu::layernorm_forward(out_ref, mean_ref, rstd_ref, in.x, in.w, none, eps);
    Tensor mean = to_device(mean_ref, DType::F32), rstd = to_device(rstd_ref, DType::F32);
    Tensor dx_ref = Tensor::empty({c.rows, c.C}, DType::F32);
    Tensor dw_ref = in.dw0.clone(), db_ref = in.db0.clone();
    ops::cpu::layernorm_backward(dx_ref, dw_ref, db_ref, in.dout, in.x, in.w, mean_ref, rstd_ref, Tensor());

    // dx aliasing dout.
    Tensor g = to_device(in.dout, dt.act);
    Tensor dw = to_device(in.dw0, DType::F32), db = to_device(in.db0, DType::F32);
    ops::cuda::layernorm_backward(g, dw, db, g, x, w, mean, rstd, Tensor());
    EXPECT_TRUE(close(L + " dx in place", to_host_f32(g), dx_ref, tol(dt.act)));
    EXPECT_TRUE(close(L + " dw (in place dx)", to_host_f32(dw), dw_ref, 1e-4));

    // Only parameter gradients; then only dx (dw, db untouched).
    Tensor dout = to_device(in.dout, dt.act);
    dw = to_device(in.dw0, DType::F32);
    db = to_device(in.db0, DType::F32);
    ops::cuda::layernorm_backward(none, dw, db, dout, x, w, mean, rstd, Tensor());
    EXPECT_TRUE(close(L + " dw only", to_host_f32(dw), dw_ref, 1e-4));
    EXPECT_TRUE(close(L + " db only", to_host_f32(db), db_ref, 1e-4));
    Tensor dx = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
    poison(dx);
    ops::cuda::layernorm_backward(dx, none, none, dout, x, w, mean, rstd, Tensor());
    EXPECT_TRUE(close(L + " dx only", to_host_f32(dx), dx_ref, tol(dt.act)));
    // Accumulation: a second call adds the same increment again.
    ops::cuda::layernorm_backward(none, dw, db, dout, x, w, mean, rstd, Tensor());
    Tensor dw2_ref = dw_ref.clone();
    for (int64_t i = 0; i < c.C; ++i) dw2_ref.f32()[i] += dw_ref.f32()[i] - in.dw0.f32()[i];
    EXPECT_TRUE(close(L + " dw accumulates", to_host_f32(dw), dw2_ref, 1e-4));
  }
}

TEST(CudaNorm, RmsNormForwardBackwardMatchCpu) {
  BIOFM_REQUIRE_GPU();
  const float eps = 1e-6f;
  uint64_t seed = 900;
  for (const auto& c : kCases) {
    for (const auto& dt : dtype_combos()) {
      seed += 10;
      const Inputs in = make_inputs(c, dt, seed, 0.5f);
      const std::string L = label("rmsnorm", c, dt);
      Tensor out_ref = Tensor::empty({c.rows, c.C}, DType::F32);
      Tensor rstd_ref = Tensor::empty({c.rows}, DType::F32);
      ops::cpu::rmsnorm_forward(out_ref, rstd_ref, in.x, in.w, eps, Tensor());
      Tensor dx_ref = Tensor::empty({c.rows, c.C}, DType::F32), dw_ref = in.dw0.clone();
      ops::cpu::rmsnorm_backward(dx_ref, dw_ref, in.dout, in.x, in.w, rstd_ref, Tensor());

      Tensor x = to_device(in.x, dt.act), w = to_device(in.w, dt.param);
      Tensor out = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
      Tensor rstd = Tensor::empty({c.rows}, DType::F32, Device::CUDA);
      poison(out);
      poison(rstd);
      ops::cuda::rmsnorm_forward(out, rstd, x, w, eps, Tensor());
      EXPECT_TRUE(close(L + " out", to_host_f32(out), out_ref, tol(dt.act)));
      EXPECT_TRUE(close(L + " rstd", to_host_f32(rstd), rstd_ref, 1e-5));

      Tensor dout = to_device(in.dout, dt.act);
      Tensor dx = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
      poison(dx);
      Tensor dw = to_device(in.dw0, DType::F32);
      ops::cuda::rmsnorm_backward(dx, dw, dout, x, w, rstd, Tensor());
      const double tp = dt.act == DType::F32 ? 1e-5 : 1e-4;
      EXPECT_TRUE(close(L + " dx", to_host_f32(dx), dx_ref, tol(dt.act)));
      EXPECT_TRUE(close(L + " dw", to_host_f32(dw), dw_ref, tp));
      EXPECT_TRUE(
          close(L + " dw increment", minus(to_host_f32(dw), in.dw0), minus(dw_ref, in.dw0), tp));

      // Optional tensors: no saved rstd; dx only; dw only; dx aliasing dout.
      Tensor none;
      poison(out);
      ops::cuda::rmsnorm_forward(out, none, x, w, eps, Tensor());
      EXPECT_TRUE(close(L + " out (no rstd)", to_host_f32(out), out_ref, tol(dt.act)));
      poison(dx);
      ops::cuda::rmsnorm_backward(dx, none, dout, x, w, rstd, Tensor());
      EXPECT_TRUE(close(L + " dx only", to_host_f32(dx), dx_ref, tol(dt.act)));
      dw = to_device(in.dw0, DType::F32);
      ops::cuda::rmsnorm_backward(none, dw, dout, x, w, rstd, Tensor());
      EXPECT_TRUE(close(L + " dw only", to_host_f32(dw), dw_ref, tp));
      ops::cuda::rmsnorm_backward(dout, none, dout, x, w, rstd, Tensor());
      EXPECT_TRUE(close(L + " dx in place", to_host_f32(dout), dx_ref, tol(dt.act)));

      // The residual gradient folded into dx (separate, and aliasing dx), RMSNorm and LayerNorm.
      const Tensor res0 = round_to(randn({c.rows, c.C}, seed + 9), dt.act);
      Tensor dxr_ref = Tensor::empty({c.rows, c.C}, DType::F32);
      ops::cpu::rmsnorm_backward(dxr_ref, none, in.dout, in.x, in.w, rstd_ref, res0);
      Tensor dout2 = to_device(in.dout, dt.act);
      poison(dx);
      ops::cuda::rmsnorm_backward(dx, none, dout2, x, w, rstd, to_device(res0, dt.act));
      EXPECT_TRUE(close(L + " dx + dres", to_host_f32(dx), dxr_ref, tol(dt.act)));
      Tensor alias = to_device(res0, dt.act);
      ops::cuda::rmsnorm_backward(alias, none, dout2, x, w, rstd, alias);
      EXPECT_TRUE(close(L + " dx + dres aliased", to_host_f32(alias), dxr_ref, tol(dt.act)));
      Tensor mean_l = Tensor::empty({c.rows}, DType::F32), rstd_l = Tensor::empty({c.rows}, DType::F32);
      Tensor out_l = Tensor::empty({c.rows, c.C}, DType::F32);
      ops::cpu::layernorm_forward(out_l, mean_l, rstd_l, in.x, in.w, in.b, eps);
      ops::cpu::layernorm_backward(dxr_ref, none, none, in.dout, in.x, in.w, mean_l, rstd_l, res0);
      poison(dx);
      ops::cuda::layernorm_backward(dx, none, none, dout2, x, w, mean_l.to(Device::CUDA), rstd_l.to(Device::CUDA),
                                    to_device(res0, dt.act));
      EXPECT_TRUE(close(L + " layernorm dx + dres", to_host_f32(dx), dxr_ref, tol(dt.act)));
    }
  }
}

TEST(CudaNorm, MisalignedRowsUseTheScalarPath) {
  BIOFM_REQUIRE_GPU();
  // A view starting one element into its storage: not 16-byte aligned, so VEC = 1.
  const int64_t rows = 37, C = 320;
  for (const auto& dt : dtype_combos()) {
    Tensor xh = round_to(randn({rows * C + 1}, 31, 1.5f), dt.act);
    Tensor w_h = round_to(randn({C}, 32), dt.param), b_h = round_to(randn({C}, 33), dt.param);
    Tensor x_view_h = xh.flat_slice(1, {rows, C}).clone();
    Tensor out_ref = Tensor::empty({rows, C}, DType::F32);
    Tensor mean_ref = Tensor::empty({rows}, DType::F32),
           rstd_ref = Tensor::empty({rows}, DType::F32);
    ops::cpu::layernorm_forward(out_ref, mean_ref, rstd_ref, x_view_h, w_h, b_h, 1e-5f);
    Tensor xd = to_device(xh, dt.act);
    Tensor x = xd.flat_slice(1, {rows, C});
    Tensor outd = Tensor::empty({rows * C + 1}, dt.act, Device::CUDA);
    poison(outd);
    Tensor out = outd.flat_slice(1, {rows, C});
    Tensor none;
    ops::cuda::layernorm_forward(out, none, none, x, to_device(w_h, dt.param),
                                 to_device(b_h, dt.param), 1e-5f);
    EXPECT_TRUE(
        close("misaligned layernorm " + combo_name(dt), to_host_f32(out), out_ref, tol(dt.act)));
  }
}

TEST(CudaNorm, EveryChunksPerThreadChoiceMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  // ops.norm_chunks picks how many 8-feature chunks a thread caches (threads per row follow);
  // each compiled choice, forced, against the CPU (backward caps at 4: 8 reads as 4).
  const std::vector<NormCase> cases = {{300, 1280}, {37, 2048}, {19, 640}, {5, 5120}};
  const DtypeCombo dt = dtype_combos()[1];  // bf16 activations and weights, as in training
  ASSERT_EQ(dt.param, DType::BF16);
  for (int chunks : {1, 2, 4, 8}) {
    testkit::ScopedOpOptions opt([&](ops::OpOptions& o) { o.norm_chunks = chunks; });
    for (const auto& c : cases) {
      const Inputs in = make_inputs(c, dt, 4000 + uint64_t(chunks), 1.0f);
      const std::string L = label("layernorm", c, dt) + " norm_chunks " + std::to_string(chunks);
      Tensor out_ref = Tensor::empty({c.rows, c.C}, DType::F32);
      Tensor mean_ref = Tensor::empty({c.rows}, DType::F32), rstd_ref = Tensor::empty({c.rows}, DType::F32);
      ops::cpu::layernorm_forward(out_ref, mean_ref, rstd_ref, in.x, in.w, in.b, 1e-5f);
      const Tensor res = round_to(randn({c.rows, c.C}, 77), dt.act);
      Tensor dx_ref = Tensor::empty({c.rows, c.C}, DType::F32);
      Tensor dw_ref = in.dw0.clone(), db_ref = in.db0.clone();
      ops::cpu::layernorm_backward(dx_ref, dw_ref, db_ref, in.dout, in.x, in.w, mean_ref, rstd_ref, res);

      Tensor x = to_device(in.x, dt.act), w = to_device(in.w, dt.param), b = to_device(in.b, dt.param);
      Tensor out = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
      Tensor mean = Tensor::empty({c.rows}, DType::F32, Device::CUDA), rstd = Tensor::empty({c.rows}, DType::F32, Device::CUDA);
      poison(out);
      ops::cuda::layernorm_forward(out, mean, rstd, x, w, b, 1e-5f);
      EXPECT_TRUE(close(L + " out", to_host_f32(out), out_ref, tol(dt.act)));
      Tensor dx = Tensor::empty({c.rows, c.C}, dt.act, Device::CUDA);
      poison(dx);
      Tensor dw = to_device(in.dw0, DType::F32), db = to_device(in.db0, DType::F32);
      ops::cuda::layernorm_backward(dx, dw, db, to_device(in.dout, dt.act), x, w, mean, rstd, to_device(res, dt.act));
      EXPECT_TRUE(close(L + " dx + dres", to_host_f32(dx), dx_ref, tol(dt.act)));
      EXPECT_TRUE(close(L + " dw", to_host_f32(dw), dw_ref, 1e-4));
      EXPECT_TRUE(close(L + " db", to_host_f32(db), db_ref, 1e-4));

      Tensor rout_ref = Tensor::empty({c.rows, c.C}, DType::F32), rrstd_ref = Tensor::empty({c.rows}, DType::F32);
      ops::cpu::rmsnorm_forward(rout_ref, rrstd_ref, in.x, in.w, 1e-6f, Tensor());
      Tensor rdx_ref = Tensor::empty({c.rows, c.C}, DType::F32), rdw_ref = in.dw0.clone();
      ops::cpu::rmsnorm_backward(rdx_ref, rdw_ref, in.dout, in.x, in.w, rrstd_ref, Tensor());
      poison(out);
      ops::cuda::rmsnorm_forward(out, rstd, x, w, 1e-6f, Tensor());
      EXPECT_TRUE(close(L + " rmsnorm out", to_host_f32(out), rout_ref, tol(dt.act)));
      poison(dx);
      dw = to_device(in.dw0, DType::F32);
      ops::cuda::rmsnorm_backward(dx, dw, to_device(in.dout, dt.act), x, w, rstd, Tensor());
      EXPECT_TRUE(close(L + " rmsnorm dx", to_host_f32(dx), rdx_ref, tol(dt.act)));
      EXPECT_TRUE(close(L + " rmsnorm dw", to_host_f32(dw), rdw_ref, 1e-4));
    }
  }
}
