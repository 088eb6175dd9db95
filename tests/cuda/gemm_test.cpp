// CUDA linear layers (cuBLASLt) against the CPU reference, F32 and BF16.
// BF16 cases round the random inputs to bf16 first, so both sides see the same values and
// the difference measures only the GPU's arithmetic and output rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "../testing.h"
#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/gemm/tuning.h"

namespace biofm {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no GPU visible"

// Host F32 copy of any F32/BF16 tensor.
Tensor host_f32(const Tensor& t) { return t.to(Device::CPU).to(DType::F32); }

// F32 host tensor rounded through bf16 when dt is BF16 (the values both sides will use).
Tensor in_precision(const Tensor& t, DType dt) { return dt == DType::BF16 ? t.to(DType::BF16).to(DType::F32) : t; }

// Device tensor of dtype dt holding the values of the F32 host tensor t.
Tensor upload(const Tensor& t, DType dt) { return t.to(dt).to(Device::CUDA); }

// Device tensor filled with NaN (catches elements an op fails to write).
Tensor nan_gpu(const Shape& s, DType dt) {
  Tensor h = Tensor::empty(s, DType::F32);
  h.fill_(std::numeric_limits<float>::quiet_NaN());
  return upload(h, dt);
}

// ||a - b|| / ||b|| over host F32 tensors (NaN anywhere gives NaN).
double rel_err(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = double(a.f32()[i]) - double(b.f32()[i]);
    num += d * d;
    den += double(b.f32()[i]) * double(b.f32()[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

Tensor minus(const Tensor& a, const Tensor& b) {
  Tensor r = Tensor::empty(a.shape(), DType::F32);
  for (int64_t i = 0; i < a.numel(); ++i) r.f32()[i] = a.f32()[i] - b.f32()[i];
  return r;
}

struct Case {
  int64_t N, I, O;
  bool bias, want_dx;
  DType dt;
  bool misaligned = false;  // x, w, bias and dout as views at odd element offsets
};

// A device tensor holding host values `t` at element offset `off` inside a larger buffer.
Tensor upload_at(const Tensor& t, DType dt, int64_t off) {
  if (off == 0) return upload(t, dt);
  Tensor buf = Tensor::zeros({t.numel() + off}, dt, Device::CUDA);
  Tensor view = buf.flat_slice(off, t.shape());
  view.copy_from(t.to(dt));
  return view;
}

void run_case(const Case& c, uint64_t seed) {
  const DType dt = c.dt;
  const double tol = dt == DType::F32 ? 2e-5 : 1e-2;
  const Tensor x = in_precision(testkit::randn({c.N, c.I}, seed + 1), dt);
  const Tensor w = in_precision(testkit::randn({c.O, c.I}, seed + 2, 1.0f / std::sqrt(float(c.I))), dt);
  const Tensor b = c.bias ? in_precision(testkit::randn({c.O}, seed + 3), dt) : Tensor();
  const Tensor dout = in_precision(testkit::randn({c.N, c.O}, seed + 4), dt);
  const Tensor dw0 = testkit::randn({c.O, c.I}, seed + 5);
  const Tensor db0 = testkit::randn({c.O}, seed + 6);

  // CPU reference in fp32.
  Tensor out_c = Tensor::empty({c.N, c.O}, DType::F32);
  ops::cpu::linear_forward(out_c, x, w, b, Tensor());
  Tensor dx_c = c.want_dx ? Tensor::empty({c.N, c.I}, DType::F32) : Tensor();
  Tensor dw_c = dw0.clone(), db_c = c.bias ? db0.clone() : Tensor();
  ops::cpu::linear_backward(dx_c, dw_c, db_c, dout, x, w);

  // GPU.
  const int64_t off = c.misaligned ? 1 : 0;
  const Tensor xg = upload_at(x, dt, off), wg = upload_at(w, dt, off),
               bg = c.bias ? upload_at(b, dt, off) : Tensor(), doutg = upload_at(dout, dt, off);
  Tensor out_g = nan_gpu({c.N, c.O}, dt);
  ops::cuda::linear_forward(out_g, xg, wg, bg, Tensor());
  Tensor dx_g = c.want_dx ? nan_gpu({c.N, c.I}, dt) : Tensor();
  Tensor dw_g = dw0.to(Device::CUDA), db_g = c.bias ? db0.to(Device::CUDA) : Tensor();
  ops::cuda::linear_backward(dx_g, dw_g, db_g, doutg, xg, wg);

  // The residual operand (C of the GEMM, or the add fallback for misaligned views).
  const Tensor res = in_precision(testkit::randn({c.N, c.O}, seed + 7), dt);
  Tensor out_rc = Tensor::empty({c.N, c.O}, DType::F32);
  ops::cpu::linear_forward(out_rc, x, w, b, res);
  Tensor out_rg = nan_gpu({c.N, c.O}, dt);
  ops::cuda::linear_forward(out_rg, xg, wg, bg, upload_at(res, dt, off));

  const std::string what = std::string(dtype_name(dt)) + " N=" + std::to_string(c.N) + " I=" +
                           std::to_string(c.I) + " O=" + std::to_string(c.O) +
                           (c.bias ? " bias" : "") + (c.misaligned ? " misaligned" : "");
  const double e_out = rel_err(host_f32(out_g), out_c);
  EXPECT_LT(e_out, tol) << what << ": out";
  EXPECT_LT(rel_err(host_f32(out_rg), out_rc), tol) << what << ": out with residual";
  if (c.want_dx) {
    EXPECT_LT(rel_err(host_f32(dx_g), dx_c), tol) << what << ": dx";
  }
  // dw and dbias are F32 even for bf16 inputs: fp32 accumulation of identical products.
  const double acc_tol = 2e-5;
  const Tensor dw_h = host_f32(dw_g);
  EXPECT_LT(rel_err(minus(dw_h, dw0), minus(dw_c, dw0)), acc_tol) << what << ": dw increment";
  EXPECT_LT(rel_err(dw_h, dw_c), acc_tol) << what << ": dw";
  if (c.bias) {
    const Tensor db_h = host_f32(db_g);
    EXPECT_LT(rel_err(minus(db_h, db0), minus(db_c, db0)), acc_tol) << what << ": dbias increment";
  }
  std::printf("[gemm] %-40s out rel err %.2e\n", what.c_str(), e_out);
}

TEST(CudaGemm, OddShapesF32) {
  REQUIRE_GPU();
  run_case({37, 24, 40, true, true, DType::F32}, 100);
  run_case({37, 24, 40, false, true, DType::F32}, 110);
  run_case({37, 24, 40, true, false, DType::F32}, 120);
  run_case({1, 3, 5, true, true, DType::F32}, 130);
  run_case({129, 65, 33, true, true, DType::F32}, 140);
  run_case({37, 24, 37, true, true, DType::F32}, 150);
}

TEST(CudaGemm, OddShapesBF16) {
  REQUIRE_GPU();
  run_case({37, 24, 40, true, true, DType::BF16}, 200);
  run_case({37, 24, 40, false, true, DType::BF16}, 210);
  run_case({37, 24, 40, true, false, DType::BF16}, 220);
  run_case({129, 65, 33, true, true, DType::BF16}, 230);
  run_case({37, 24, 37, true, true, DType::BF16}, 240);
}

// Many rows, few columns: the dw GEMM (and its fused bias gradient) reduces over a long k,
// where cuBLASLt likes split-K. dbias starts nonzero and must be accumulated into.
TEST(CudaGemm, LongReductionWithBias) {
  REQUIRE_GPU();
  run_case({8192, 64, 40, true, false, DType::F32}, 250);
  run_case({8192, 64, 40, true, false, DType::BF16}, 260);
  run_case({6000, 48, 37, true, true, DType::BF16}, 270);
}

TEST(CudaGemm, MisalignedViews) {
  REQUIRE_GPU();
  run_case({37, 24, 40, true, true, DType::F32, true}, 300);
  run_case({37, 24, 40, true, true, DType::BF16, true}, 310);
  run_case({64, 64, 64, true, true, DType::BF16, true}, 320);
  run_case({300, 64, 40, true, true, DType::BF16, true}, 330);
  run_case({300, 64, 37, true, true, DType::F32, true}, 340);
}

TEST(CudaGemm, LargeF32) {
  REQUIRE_GPU();
  run_case({4096, 1280, 5120, true, true, DType::F32}, 400);
}

TEST(CudaGemm, LargeBF16) {
  REQUIRE_GPU();
  run_case({4096, 1280, 5120, true, true, DType::BF16}, 500);
  run_case({4096, 5120, 1280, false, true, DType::BF16}, 510);
}

// x and out with extra leading dimensions are read as [numel / last, last].
TEST(CudaGemm, LeadingDimensions) {
  REQUIRE_GPU();
  const Tensor x = testkit::randn({3, 5, 24}, 600), w = testkit::randn({40, 24}, 601),
               b = testkit::randn({40}, 602);
  Tensor out_c = Tensor::empty({3, 5, 40}, DType::F32);
  ops::cpu::linear_forward(out_c, x, w, b, Tensor());
  Tensor out_g = nan_gpu({3, 5, 40}, DType::F32);
  ops::cuda::linear_forward(out_g, x.to(Device::CUDA), w.to(Device::CUDA), b.to(Device::CUDA), Tensor());
  EXPECT_LT(rel_err(host_f32(out_g), out_c), 2e-5);
}

// F32 activations with a BF16 weight (compute copy): the weight is widened, exactly.
TEST(CudaGemm, MixedWeightDtype) {
  REQUIRE_GPU();
  const Tensor x = testkit::randn({37, 24}, 700);
  const Tensor w = in_precision(testkit::randn({40, 24}, 701), DType::BF16);
  const Tensor b = in_precision(testkit::randn({40}, 702), DType::BF16);
  Tensor out_c = Tensor::empty({37, 40}, DType::F32);
  ops::cpu::linear_forward(out_c, x, w, b, Tensor());
  Tensor out_g = nan_gpu({37, 40}, DType::F32);
  ops::cuda::linear_forward(out_g, x.to(Device::CUDA), upload(w, DType::BF16), upload(b, DType::BF16), Tensor());
  EXPECT_LT(rel_err(host_f32(out_g), out_c), 2e-5);
}

// The cached plan gives bit-identical results on repeated calls; accumulation really adds.
TEST(CudaGemm, RepeatableAndAccumulates) {
  REQUIRE_GPU();
  const Tensor x = upload(testkit::randn({256, 96}, 800), DType::BF16);
  const Tensor w = upload(testkit::randn({160, 96}, 801), DType::BF16);
  const Tensor dout = upload(testkit::randn({256, 160}, 802), DType::BF16);
  Tensor o1 = nan_gpu({256, 160}, DType::BF16), o2 = nan_gpu({256, 160}, DType::BF16);
  ops::cuda::linear_forward(o1, x, w, Tensor(), Tensor());
  ops::cuda::linear_forward(o2, x, w, Tensor(), Tensor());
  const Tensor h1 = host_f32(o1), h2 = host_f32(o2);
  for (int64_t i = 0; i < h1.numel(); ++i) ASSERT_EQ(h1.f32()[i], h2.f32()[i]) << "element " << i;

  Tensor dx, db;
  Tensor dw_once = Tensor::zeros({160, 96}, DType::F32, Device::CUDA);
  Tensor dw_twice = Tensor::zeros({160, 96}, DType::F32, Device::CUDA);
  Tensor db_twice = Tensor::zeros({160}, DType::F32, Device::CUDA);
  ops::cuda::linear_backward(dx, dw_once, db, dout, x, w);
  ops::cuda::linear_backward(dx, dw_twice, db_twice, dout, x, w);
  ops::cuda::linear_backward(dx, dw_twice, db_twice, dout, x, w);
  const Tensor a = host_f32(dw_once), b2 = host_f32(dw_twice);
  Tensor twice_a = a.clone();
  for (int64_t i = 0; i < a.numel(); ++i) twice_a.f32()[i] *= 2.0f;
  EXPECT_LT(rel_err(b2, twice_a), 1e-6);

  // dbias: once through the dw GEMM (fused bias gradient where available), once without dw
  // (the column-sum kernel); twice must be twice once, and the two routes must agree.
  Tensor no_dw;
  Tensor db_alone = Tensor::zeros({160}, DType::F32, Device::CUDA);
  ops::cuda::linear_backward(dx, no_dw, db_alone, dout, x, w);
  const Tensor d_alone = host_f32(db_alone), d_twice = host_f32(db_twice);
  Tensor twice_d = d_alone.clone();
  for (int64_t i = 0; i < d_alone.numel(); ++i) twice_d.f32()[i] *= 2.0f;
  EXPECT_LT(rel_err(d_twice, twice_d), 1e-6);
}

// dw + dbias (the fused bias-gradient GEMM where cuBLASLt has one) are bit-identical from one
// call to the next, including long reductions where split-K is likely.
TEST(CudaGemm, BiasGradRepeatable) {
  REQUIRE_GPU();
  const int64_t shapes[][3] = {{8192, 64, 40}, {4096, 1280, 1280}};
  for (const auto& sh : shapes) {
    const int64_t N = sh[0], I = sh[1], O = sh[2];
    const Tensor x = upload(testkit::randn({N, I}, 850), DType::BF16);
    const Tensor w = upload(testkit::randn({O, I}, 851), DType::BF16);
    const Tensor dout = upload(testkit::randn({N, O}, 852), DType::BF16);
    Tensor dx, dw[2], db[2];
    for (int r = 0; r < 2; ++r) {
      dw[r] = Tensor::zeros({O, I}, DType::F32, Device::CUDA);
      db[r] = Tensor::zeros({O}, DType::F32, Device::CUDA);
      ops::cuda::linear_backward(dx, dw[r], db[r], dout, x, w);
    }
    const Tensor w0 = host_f32(dw[0]), w1 = host_f32(dw[1]), b0 = host_f32(db[0]), b1 = host_f32(db[1]);
    for (int64_t i = 0; i < w0.numel(); ++i) ASSERT_EQ(w0.f32()[i], w1.f32()[i]) << "N=" << N << " dw " << i;
    for (int64_t i = 0; i < b0.numel(); ++i) ASSERT_EQ(b0.f32()[i], b1.f32()[i]) << "N=" << N << " dbias " << i;
  }
}

TEST(CudaGemm, EmptyDimensions) {
  REQUIRE_GPU();
  // N = 0: nothing to do, dw and dbias unchanged.
  Tensor dx = Tensor::empty({0, 4}, DType::F32, Device::CUDA);
  Tensor dw = testkit::randn({3, 4}, 901).to(Device::CUDA);
  Tensor db = testkit::randn({3}, 902).to(Device::CUDA);
  const Tensor dw0 = host_f32(dw);
  ops::cuda::linear_backward(dx, dw, db, Tensor::empty({0, 3}, DType::F32, Device::CUDA),
                             Tensor::empty({0, 4}, DType::F32, Device::CUDA),
                             testkit::randn({3, 4}, 903).to(Device::CUDA));
  EXPECT_EQ(rel_err(host_f32(dw), dw0), 0.0);
}

TEST(CudaGemm, BadArgumentsThrow) {
  REQUIRE_GPU();
  Tensor out = Tensor::empty({4, 5}, DType::F32, Device::CUDA);
  const Tensor x = Tensor::empty({4, 3}, DType::F32, Device::CUDA);
  EXPECT_THROW(ops::cuda::linear_forward(out, x, Tensor::empty({5, 4}, DType::F32, Device::CUDA), Tensor(), Tensor()),
               Error);
  Tensor out_bf = Tensor::empty({4, 5}, DType::BF16, Device::CUDA);
  EXPECT_THROW(ops::cuda::linear_forward(out_bf, x, Tensor::empty({5, 3}, DType::F32, Device::CUDA), Tensor(), Tensor()),
               Error);
  Tensor dx, db, dw_bf = Tensor::empty({5, 3}, DType::BF16, Device::CUDA);
  EXPECT_THROW(ops::cuda::linear_backward(dx, dw_bf, db, Tensor::empty({4, 5}, DType::F32, Device::CUDA), x,
                                          Tensor::empty({5, 3}, DType::F32, Device::CUDA)),
               Error);
}

// Not a check: prints the bf16 throughput of the three GEMMs of a 4096x5120x1280 layer.
TEST(CudaGemm, ThroughputReport) {
  REQUIRE_GPU();
  const int64_t N = 8192, I = 4096, O = 4096;
  const Tensor x = Tensor::zeros({N, I}, DType::BF16, Device::CUDA);
  const Tensor w = Tensor::zeros({O, I}, DType::BF16, Device::CUDA);
  const Tensor b = Tensor::zeros({O}, DType::BF16, Device::CUDA);
  Tensor out = Tensor::empty({N, O}, DType::BF16, Device::CUDA);
  Tensor dx = Tensor::empty({N, I}, DType::BF16, Device::CUDA);
  Tensor dw = Tensor::zeros({O, I}, DType::F32, Device::CUDA);
  Tensor db = Tensor::zeros({O}, DType::F32, Device::CUDA);
  Tensor none;
  cudaEvent_t e0, e1;
  BIOFM_CUDA_CHECK(cudaEventCreate(&e0));
  BIOFM_CUDA_CHECK(cudaEventCreate(&e1));
  auto time_it = [&](const char* name, auto&& fn) {
    for (int i = 0; i < 3; ++i) fn();
    BIOFM_CUDA_CHECK(cudaEventRecord(e0, cuda_ctx::stream()));
    const int iters = 20;
    for (int i = 0; i < iters; ++i) fn();
    BIOFM_CUDA_CHECK(cudaEventRecord(e1, cuda_ctx::stream()));
    BIOFM_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    BIOFM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double tflops = 2.0 * N * I * O * iters / (ms * 1e-3) / 1e12;
    std::printf("[gemm bf16 %ldx%ldx%ld] %-22s %7.3f ms  %6.1f TFLOP/s\n", long(N), long(I), long(O), name,
                ms / iters, tflops);
  };
  time_it("forward (+bias)", [&] { ops::cuda::linear_forward(out, x, w, b, Tensor()); });
  time_it("backward dx", [&] { ops::cuda::linear_backward(dx, none, none, out, x, w); });
  time_it("backward dw (+=)", [&] { ops::cuda::linear_backward(none, dw, none, out, x, w); });
  time_it("backward dw+dbias", [&] { ops::cuda::linear_backward(none, dw, db, out, x, w); });
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// linear_gelu_forward / linear_dgelu_backward run the fused CUTLASS kernels exactly where they
// apply (BF16, feature dims multiples of 8, ops.gemm_fused_gelu), and the fused results agree
// with the unfused cuBLASLt + GELU pair (the fused epilogue applies GELU to the fp32
// accumulator, the pair to the bf16-rounded pre-activation: a rounding apart).
TEST(CudaGemm, GeluFusionRunsWhereItApplies) {
  REQUIRE_GPU();
  const int64_t N = 777, H = 1024, F = 512;
  const Tensor x = upload(testkit::randn({N, H}, 1), DType::BF16);
  const Tensor w1 = upload(testkit::randn({F, H}, 2, 0.1f), DType::BF16);
  const Tensor b1 = upload(testkit::randn({F}, 3), DType::BF16);
  const Tensor w2 = upload(testkit::randn({H, F}, 4, 0.05f), DType::BF16);
  const Tensor dout = upload(testkit::randn({N, H}, 5), DType::BF16);
  struct Out {
    Tensor act, pre, act_only, dpre;
  };
  auto run = [&] {
    Out o{nan_gpu({N, F}, DType::BF16), nan_gpu({N, F}, DType::BF16), nan_gpu({N, F}, DType::BF16),
          nan_gpu({N, F}, DType::BF16)};
    Tensor none;
    ops::linear_gelu_forward(o.act, o.pre, x, w1, b1);
    ops::linear_gelu_forward(o.act_only, none, x, w1, b1);
    ops::linear_dgelu_backward(o.dpre, dout, w2, o.pre);
    return o;
  };
  const int64_t c0 = ops::cuda::gemm_gelu_fused_calls();
  const Out fused = run();
  EXPECT_EQ(ops::cuda::gemm_gelu_fused_calls(), c0 + 3);
  Out unfused;
  {
    testkit::ScopedOpOptions off([](ops::OpOptions& o) { o.gemm_fused_gelu = false; });
    unfused = run();
  }
  EXPECT_EQ(ops::cuda::gemm_gelu_fused_calls(), c0 + 3);
  EXPECT_LT(rel_err(host_f32(fused.pre), host_f32(unfused.pre)), 1e-2);
  EXPECT_LT(rel_err(host_f32(fused.act), host_f32(unfused.act)), 1e-2);
  EXPECT_EQ(rel_err(host_f32(fused.act_only), host_f32(fused.act)), 0.0);
  EXPECT_LT(rel_err(host_f32(fused.dpre), host_f32(unfused.dpre)), 1e-2);

  // A feature dimension that is not a multiple of 8, F32, a contraction outside [1024, 2048]:
  // the unfused pair, not counted, and right (against the CPU op on the same values).
  auto check_unfused = [&](int64_t h, int64_t f, DType dt, uint64_t seed) {
    SCOPED_TRACE("H " + std::to_string(h) + " F " + std::to_string(f) + " " + dtype_name(dt));
    const Tensor hx = in_precision(testkit::randn({N, h}, seed), dt);
    const Tensor hw = in_precision(testkit::randn({f, h}, seed + 1, 0.1f), dt);
    const Tensor hb = in_precision(testkit::randn({f}, seed + 2), dt);
    Tensor act = nan_gpu({N, f}, dt), pre = nan_gpu({N, f}, dt), ref_act = Tensor::empty({N, f}, DType::F32),
           ref_pre = Tensor::empty({N, f}, DType::F32);
    const int64_t before = ops::cuda::gemm_gelu_fused_calls();
    ops::linear_gelu_forward(act, pre, upload(hx, dt), upload(hw, dt), upload(hb, dt));
    EXPECT_EQ(ops::cuda::gemm_gelu_fused_calls(), before);
    ops::linear_gelu_forward(ref_act, ref_pre, hx, hw, hb);
    const double tol = dt == DType::F32 ? 2e-5 : 1e-2;
    EXPECT_LT(rel_err(host_f32(act), ref_act), tol);
    EXPECT_LT(rel_err(host_f32(pre), ref_pre), tol);
  };
  check_unfused(H, F, DType::F32, 20);
  check_unfused(H, 20, DType::BF16, 30);
  check_unfused(512, F, DType::BF16, 40);
  check_unfused(2056, 64, DType::BF16, 50);
}

}  // namespace

TEST(CudaGemm, AutotuneTimesEachShapeBucketOnceAndKeepsResults) {
  REQUIRE_GPU();
  // ops.gemm_autotune: a shape bucket is timed once (its first shape tunes its GEMMs, the
  // accumulating weight-gradient GEMM included, whose output is restored after the timing runs);
  // a shape within 1024 in every dimension reuses the choice; with the option off nothing is
  // timed. Results match the CPU every time, with either bias-gradient route.
  for (bool bgradb : {false, true}) {
    testkit::ScopedOpOptions on([&](ops::OpOptions& o) {
      o.gemm_autotune = true;
      o.gemm_fused_bgrad = bgradb;
    });
    const int64_t off = bgradb ? 2048 : 0;  // a fresh bucket for each route
    const int64_t t0 = ops::cuda::gemm_autotune_tunings();
    run_case({3001 + off, 264, 392, true, true, DType::BF16}, 900);
    const int64_t t1 = ops::cuda::gemm_autotune_tunings();
    EXPECT_GT(t1, t0) << "a new shape bucket should have been timed";
    run_case({3007 + off, 264, 392, true, true, DType::BF16}, 901);  // same bucket
    EXPECT_EQ(ops::cuda::gemm_autotune_tunings(), t1);
    run_case({3001 + off, 264, 392, true, true, DType::F32}, 903);   // another dtype: its own buckets
    const int64_t t2 = ops::cuda::gemm_autotune_tunings();
    run_case({3005 + off, 264, 392, true, true, DType::F32}, 904);   // same bucket as the F32 one
    EXPECT_EQ(ops::cuda::gemm_autotune_tunings(), t2);
  }
  const int64_t t3 = ops::cuda::gemm_autotune_tunings();
  run_case({9001, 264, 392, true, true, DType::BF16}, 902);  // option off (the default): not timed
  EXPECT_EQ(ops::cuda::gemm_autotune_tunings(), t3);
}

TEST(CudaGemm, TuningTableRoundTripsAndIsTakenInsteadOfTiming) {
  REQUIRE_GPU();
  // A checkpoint keeps ops.gemm_autotune's choices (tuning.h) and a resumed run takes them: a
  // bucket in a loaded table is not timed again, one missing from it is.
  testkit::ScopedOpOptions on([](ops::OpOptions& o) { o.gemm_autotune = true; });
  run_case({5001, 264, 392, true, true, DType::BF16}, 1000);  // a bucket no other test uses
  const std::string table = ops::gemm_tuning_table();
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(ops::gemm_tuning_table(), table) << "the same choices give the same bytes";

  // A new process's state: no choices; the bucket is timed again.
  ops::clear_gemm_tuning();
  EXPECT_TRUE(ops::gemm_tuning_table().empty());
  const int64_t t0 = ops::cuda::gemm_autotune_tunings();
  run_case({5003, 264, 392, true, true, DType::BF16}, 1001);
  const int64_t t1 = ops::cuda::gemm_autotune_tunings();
  EXPECT_GT(t1, t0);

  // The saved table restores every choice: no bucket in it is timed again.
  std::string why;
  EXPECT_GT(ops::load_gemm_tuning_table(table, &why), 0) << why;
  EXPECT_EQ(ops::gemm_tuning_table(), table);
  run_case({5001, 264, 392, true, true, DType::BF16}, 1002);  // plans built before the load
  run_case({5007, 264, 392, true, true, DType::BF16}, 1003);  // a new shape of a loaded bucket
  EXPECT_EQ(ops::cuda::gemm_autotune_tunings(), t1) << "loaded choices are taken, not timed";

  // Another cuBLASLt version: refused with the reason, nothing changes; broken tables throw.
  std::string other = table;
  const size_t version_at = std::string("biofm-gemm-tuning-v1\n").size();
  other[version_at] = char(other[version_at] ^ 1);
  why.clear();
  EXPECT_EQ(ops::load_gemm_tuning_table(other, &why), -1);
  EXPECT_NE(why.find("cuBLASLt"), std::string::npos) << why;
  EXPECT_EQ(ops::gemm_tuning_table(), table);
  EXPECT_THROW(ops::load_gemm_tuning_table(table.substr(0, table.size() - 1), nullptr), Error);
  EXPECT_THROW(ops::load_gemm_tuning_table("not a table", nullptr), Error);
}

}  // namespace biofm
