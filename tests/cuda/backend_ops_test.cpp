// Every public op on CUDA against the CPU reference, one table entry per (op, shape), each run
// in F32 and (where the op takes it) BF16, in the spirit of ggml's test-backend-ops.
//
// An entry is a function of an Env: it asks the Env for inputs (random, from a counter-based
// seed, so the CPU and the CUDA run see the same values), runs the op through the public
// dispatch and names the outputs to compare. The harness runs it once on the CPU (F32 tensors
// holding the values rounded to the dtype under test) and once on the GPU (tensors in that
// dtype; outputs poisoned with NaN first) and holds every output to a per-dtype bound on
// ||cuda - cpu|| / ||cpu|| and on its worst element; a second GPU run must give the same bits
// (except outputs a kernel adds into with atomics, Case::atomic_outputs).
// Accumulated outputs (+=) start from the same random values and are compared as increments.
// Besides hand-picked edge shapes, every row-wise op runs at the widths of each shipped model
// config (add_model_widths). The per-op tests next to this file keep the special cases
// (aliasing, errors, alignment, paths).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "biofm/ops/activation/op.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/embedding/op.h"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/loss/op.h"
#include "biofm/ops/norm/op.h"
#include "biofm/ops/optim/op.h"
#include "biofm/ops/rope/op.h"
#include "biofm/train/config.h"
#include "cuda/cuda_test_util.h"

namespace biofm::cudatest {
namespace {

constexpr DType F32 = DType::F32, BF16 = DType::BF16;

class Env {
 public:
  Env(Device dev, DType dt) : dev_(dev), dt_(dt) {}
  DType dt() const { return dt_; }
  bool gpu() const { return dev_ == Device::CUDA; }

  // Random normal input in the dtype under test (or `t`).
  Tensor in(const Shape& s, float scale = 1.0f) { return place(randn(s, next_seed(), scale), dt_); }
  Tensor in_as(const Shape& s, DType t, float scale = 1.0f) { return place(randn(s, next_seed(), scale), t); }
  Tensor uniform(const Shape& s, float lo, float hi, DType t = F32) {
    return place(rand_uniform(s, next_seed(), lo, hi), t);
  }
  Tensor i32(const Shape& s, const std::vector<int32_t>& v) { return on_dev(Tensor::from_i32(s, v)); }
  Tensor u8(const Shape& s, const std::vector<uint8_t>& v) {
    Tensor h = Tensor::empty(s, DType::U8);
    std::copy(v.begin(), v.end(), static_cast<uint8_t*>(h.raw()));
    return on_dev(h);
  }
  Tensor i64(const Shape& s, const std::vector<int64_t>& v) {
    Tensor h = Tensor::empty(s, DType::I64);
    std::copy(v.begin(), v.end(), h.i64());
    return on_dev(h);
  }
  // A host tensor in exactly dtype `t` on both backends (ops whose CPU side takes BF16 too).
  Tensor exact(const Shape& s, DType t, float scale = 1.0f) {
    Tensor h = randn(s, next_seed(), scale);
    return on_dev(t == F32 ? h : h.to(t));
  }

  // An output in the dtype under test (or `t`); NaN on the GPU so that unwritten parts fail.
  Tensor out(const Shape& s) { return out_as(s, dt_); }
  Tensor out_as(const Shape& s, DType t) {
    if (!gpu()) return Tensor::empty(s, (t == BF16) ? F32 : t);
    Tensor d = Tensor::empty(s, t, Device::CUDA);
    if (t == F32 || t == BF16) poison(d);
    return d;
  }
  Tensor out_exact(const Shape& s, DType t) {
    Tensor d = Tensor::empty(s, t, dev_);
    if (gpu() && (t == F32 || t == BF16)) poison(d);  // (codes: the case decodes and compares them)
    return d;
  }
  // An accumulated F32 output (+=), compared as its increment.
  Tensor accum(const std::string& name, const Shape& s, float scale = 1.0f) {
    Tensor h = randn(s, next_seed(), scale);
    Tensor t = gpu() ? h.to(Device::CUDA) : h.clone();  // (a copy: h stays the initial value)
    results_.push_back({name, t, h});
    return t;
  }
  // Output `t` is compared (after the case returns).
  void check(const std::string& name, const Tensor& t) { results_.push_back({name, t, Tensor()}); }

  // Host F32 copies of the outputs, in the order they were named.
  std::vector<std::pair<std::string, Tensor>> collect() const {
    if (gpu()) cuda_ctx::synchronize();
    std::vector<std::pair<std::string, Tensor>> r;
    for (const auto& o : results_) {
      Tensor h = o.t.to(Device::CPU).clone();
      if (h.dtype() == BF16) h = h.to(F32);
      if (h.dtype() != F32) {  // U8 codes compared as their values: decoded by the case
        ADD_FAILURE() << o.name << ": compare F32/BF16 tensors, got " << h.describe();
        continue;
      }
      r.emplace_back(o.name, o.init.defined() ? minus(h, o.init) : h);
    }
    return r;
  }

 private:
  struct Result {
    std::string name;
    Tensor t, init;
  };
  uint64_t next_seed() { return 7919 * ++counter_; }
  Tensor place(const Tensor& host_f32, DType t) {
    return gpu() ? to_device(host_f32, t) : round_to(host_f32, t);
  }
  Tensor on_dev(const Tensor& h) { return gpu() ? h.to(Device::CUDA) : h; }

  Device dev_;
  DType dt_;
  uint64_t counter_ = 0;
  std::vector<Result> results_;
};

struct Case {
  std::string op, shape;
  std::vector<DType> dtypes;
  std::function<void(Env&)> run;
  double bf16_tol = 2e-2;  // the F32 bound is 1e-4
  // Outputs whose bits may differ from one GPU run to the next because a kernel adds into them
  // with atomics in whatever order threads arrive (embedding_backward's dtable; cuDNN's attention
  // backward accumulates dq so). Every other output must come out the same twice. (The F32
  // fallback attention's dq is checked for run-to-run bits in attention_test.cpp.)
  std::vector<std::string> atomic_outputs = {};
};

// ---- Sequence layouts shared by the cases (cu_seqlens slot starts, seq_lens real lengths) ----

struct Layout {
  std::string name;
  std::vector<int32_t> cu, lens;
  int64_t n() const { return cu.back(); }
  int32_t max_len() const { return *std::max_element(lens.begin(), lens.end()); }
  int64_t b() const { return int64_t(lens.size()); }
};
const Layout kPacked{"thd", {0, 5, 12, 31, 32}, {5, 7, 19, 1}};     // ragged, a length-1 sequence
const Layout kPadded{"bshd", {0, 16, 32, 48}, {9, 16, 3}};          // padding slots
const Layout kLong{"thd_long", {0, 70, 203}, {70, 133}};            // more than one tile

std::vector<int32_t> positions_of(const Layout& l) {
  std::vector<int32_t> p(size_t(l.n()), 0);
  for (size_t s = 0; s < l.lens.size(); ++s)
    for (int32_t i = 0; i < l.cu[s + 1] - l.cu[s]; ++i) p[size_t(l.cu[s] + i)] = i;
  return p;
}

std::vector<float> inv_freq_of(int64_t D) {
  std::vector<float> f(size_t(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) f[size_t(i)] = float(std::pow(10000.0, -2.0 * double(i) / double(D)));
  return f;
}

// ---- The table ----

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

void add_gemm(std::vector<Case>& t) {
  struct G {
    int64_t N, I, O;
    bool bias, residual;
  };
  for (G g : {G{7, 13, 5, true, false}, G{64, 64, 96, true, true}, G{33, 48, 40, false, false},
              G{130, 72, 24, false, true}, G{1, 16, 16, true, false},
              G{300, 64, 33, true, false}}) {  // (33: ESM-2's vocabulary, rows padded for cuBLASLt)
    const std::string shape = dims({g.N, g.I, g.O}) + (g.bias ? "+bias" : "") + (g.residual ? "+res" : "");
    t.push_back({"linear_forward", shape, {F32, BF16}, [g](Env& e) {
                   Tensor x = e.in({g.N, g.I}), w = e.in({g.O, g.I}, 0.3f);
                   Tensor b = g.bias ? e.in({g.O}) : Tensor(), r = g.residual ? e.in({g.N, g.O}) : Tensor();
                   Tensor y = e.out({g.N, g.O});
                   ops::linear_forward(y, x, w, b, r);
                   e.check("out", y);
                 }});
    t.push_back({"linear_backward", shape, {F32, BF16}, [g](Env& e) {
                   Tensor x = e.in({g.N, g.I}), w = e.in({g.O, g.I}, 0.3f), dout = e.in({g.N, g.O});
                   Tensor dx = e.out({g.N, g.I});
                   Tensor dw = e.accum("dw", {g.O, g.I});
                   Tensor db = g.bias ? e.accum("dbias", {g.O}) : Tensor();
                   ops::linear_backward(dx, dw, db, dout, x, w);
                   e.check("dx", dx);
                 }});
  }
  // The MLP's GEMM + exact GELU: fused CUTLASS kernels in BF16 where the feature dims are
  // multiples of 8 and H in [1024, 2048] (several tiles, partial tiles along tokens, features
  // (F 1000) and the contraction (H 1032)), the unfused pair otherwise (H 64 and 2056, odd dims).
  struct GG {
    int64_t N, H, F;
    bool fused;  // on an sm_90a GPU in BF16
  };
  for (GG g : {GG{1000, 1280, 640, true}, GG{300, 1024, 256, true}, GG{129, 1032, 1000, true},
               GG{300, 64, 256, false}, GG{65, 2056, 64, false}, GG{1, 16, 8, false}, GG{37, 13, 20, false}}) {
    // Checks on the GPU in BF16 that the fused kernel ran exactly when expected (a case meant for
    // the CUTLASS path must not silently test the unfused one).
    auto expect_path = [g](Env& e, int64_t before) {
      if (!e.gpu() || e.dt() != BF16) return;
      EXPECT_EQ(ops::cuda::gemm_gelu_fused_calls() - before, g.fused ? 1 : 0) << "fused path " << g.fused;
    };
    for (bool keep_pre : {true, false})
      t.push_back({"linear_gelu_forward", dims({g.N, g.H, g.F}) + (keep_pre ? "+pre" : ""), {F32, BF16},
                   [g, keep_pre, expect_path](Env& e) {
                     Tensor x = e.in({g.N, g.H}), w = e.in({g.F, g.H}, 0.15f), b = e.in({g.F});
                     Tensor act = e.out({g.N, g.F}), pre = keep_pre ? e.out({g.N, g.F}) : Tensor();
                     const int64_t before = e.gpu() ? ops::cuda::gemm_gelu_fused_calls() : 0;
                     ops::linear_gelu_forward(act, pre, x, w, b);
                     expect_path(e, before);
                     e.check("act", act);
                     if (keep_pre) e.check("pre", pre);
                   }});
    // w is the second linear's weight [O = H, F]: dpre = (dout·w) ⊙ gelu'(pre)
    t.push_back({"linear_dgelu_backward", dims({g.N, g.H, g.F}), {F32, BF16}, [g, expect_path](Env& e) {
                   Tensor dout = e.in({g.N, g.H}), w = e.in({g.H, g.F}, 0.15f), pre = e.in({g.N, g.F});
                   Tensor dpre = e.out({g.N, g.F});
                   const int64_t before = e.gpu() ? ops::cuda::gemm_gelu_fused_calls() : 0;
                   ops::linear_dgelu_backward(dpre, dout, w, pre);
                   expect_path(e, before);
                   e.check("dpre", dpre);
                 }});
  }
}

// FP8 codes as the values they decode to (F32, on the CPU), for comparing codes.
Tensor decoded(Env& e, const Tensor& q, ops::Fp8Type ft) {
  if (e.gpu()) cuda_ctx::synchronize();
  const Tensor h = q.to(Device::CPU);
  Tensor d = Tensor::empty(h.shape(), F32);
  for (int64_t i = 0; i < h.numel(); ++i) d.f32()[i] = ops::fp8_decode(static_cast<const uint8_t*>(h.raw())[i], ft);
  return d;
}

void add_fp8_quantize_at(std::vector<Case>& t, int64_t R, int64_t C, const std::string& tag = "") {
  for (ops::Fp8Type ft : {ops::Fp8Type::E4M3, ops::Fp8Type::E5M2}) {
    const int64_t Rp = (R + 15) / 16 * 16;
    t.push_back({"fp8_quantize", dims({R, C}) + " " + ops::fp8_type_name(ft) + tag, {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({R, C}, 3.0f);
                   Tensor q = e.out_exact({R, C}, DType::U8), qt = e.out_exact({C, Rp}, DType::U8);
                   Tensor s = e.out_as({1}, F32);
                   ops::fp8_quantize(q, qt, s, x, ft);
                   e.check("codes", decoded(e, q, ft));  // (compared as the values they decode to)
                   e.check("codes_t", decoded(e, qt, ft));
                   e.check("scale_inv", s);
                 }});
  }
}

// The ESM-2 MLP's GELU (or its gradient) computed inside the quantization, with a given
// (DelayedScaling) scale: codes, scale, the amax it saw, the column sums.
void add_fp8_quantize_gelu(std::vector<Case>& t) {
  for (auto [R, C] : {std::pair<int64_t, int64_t>{37, 64}, {130, 144}})
    for (ops::Fp8Type ft : {ops::Fp8Type::E4M3, ops::Fp8Type::E5M2})
      for (bool grad : {false, true}) {
        const std::string name = dims({R, C}) + " " + ops::fp8_type_name(ft) + (grad ? " gradient" : "");
        t.push_back({"fp8_quantize_gelu", name, {F32, BF16}, [=](Env& e) {
                       const int64_t Rp = (R + 15) / 16 * 16;
                       Tensor pre = e.in({R, C}, 2.0f), dact = grad ? e.in({R, C}, 0.01f) : Tensor();
                       Tensor scale_amax = grad ? e.uniform({1}, 0.005f, 0.01f) : e.uniform({1}, 1.0f, 2.0f);
                       Tensor q = e.out_exact({R, C}, DType::U8), qt = e.out_exact({C, Rp}, DType::U8);
                       // (a history row whose slot 0 the op max-folds into)
                       Tensor s = e.out_as({1}, F32), record = e.uniform({3}, 1e-4f, 2e-4f);
                       Tensor sums = e.accum("col_sums", {C});
                       ops::fp8_quantize_gelu(q, qt, s, pre, dact, ft, scale_amax, record, sums);
                       e.check("codes", decoded(e, q, ft));
                       e.check("codes_t", decoded(e, qt, ft));
                       e.check("scale_inv", s);
                       e.check("record", record);
                     },
                     // The GELU's last bit may differ between the CPU and CUDA (the same rational
                     // erf, but FMAs and an approximate division on CUDA), which may flip a bf16
                     // rounding and then one FP8 code: a step of E5M2 (2 mantissa bits) is up to
                     // 1/7 of the largest value, of E4M3 1/15.
                     ft == ops::Fp8Type::E5M2 ? 5e-2 : 2e-2});
      }
}

// The norms writing the next GEMM's codes themselves with a given (DelayedScaling) scale:
// codes, scale, the amax they saw, the statistics.
void add_norm_fp8(std::vector<Case>& t) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{37, 64}, {130, 1280}, {20, 2048}})
    for (ops::Fp8Type ft : {ops::Fp8Type::E4M3, ops::Fp8Type::E5M2})
      for (bool rms : {false, true}) {
        const std::string name = dims({N, C}) + " " + ops::fp8_type_name(ft);
        t.push_back({rms ? "rmsnorm_forward_fp8" : "layernorm_forward_fp8", name, {F32, BF16}, [=](Env& e) {
                       const int64_t Np = (N + 15) / 16 * 16;
                       Tensor x = e.in({N, C}, 3.0f), w = e.in({C}), b = rms ? Tensor() : e.in({C});
                       Tensor scale_amax = e.uniform({1}, 2.0f, 4.0f);
                       Tensor q = e.out_exact({N, C}, DType::U8), qt = e.out_exact({C, Np}, DType::U8);
                       Tensor s = e.out_as({1}, F32), record = e.uniform({3}, 0.1f, 0.2f);
                       Tensor mean = rms ? Tensor() : e.out_as({N}, F32), rstd = e.out_as({N}, F32);
                       if (rms)
                         ops::rmsnorm_forward_fp8(q, qt, s, rstd, x, w, 1e-6f, ft, scale_amax, record);
                       else
                         ops::layernorm_forward_fp8(q, qt, s, mean, rstd, x, w, b, 1e-5f, ft, scale_amax, record);
                       e.check("codes", decoded(e, q, ft));
                       e.check("codes_t", decoded(e, qt, ft));
                       e.check("scale_inv", s);
                       e.check("record", record);
                       if (!rms) e.check("mean", mean);
                       e.check("rstd", rstd);
                     },
                     // A last-bit difference of the statistics may flip a bf16 rounding and then
                     // one FP8 code (as for fp8_quantize_gelu).
                     ft == ops::Fp8Type::E5M2 ? 5e-2 : 2e-2});
      }
}

void add_fp8(std::vector<Case>& t) {
  for (auto [R, C] : {std::pair<int64_t, int64_t>{37, 64}, {128, 32}, {5, 16}}) add_fp8_quantize_at(t, R, C);
  // Transposed codes (finite ones, as fp8_quantize writes them) back to x.
  for (auto [R, C] : {std::pair<int64_t, int64_t>{37, 64}, {128, 32}, {5, 16}})
    for (ops::Fp8Type ft : {ops::Fp8Type::E4M3, ops::Fp8Type::E5M2}) {
      t.push_back({"fp8_dequantize_transposed", dims({R, C}) + " " + ops::fp8_type_name(ft), {F32, BF16}, [=](Env& e) {
                     const int64_t Rp = (R + 15) / 16 * 16;
                     const Tensor v = randn({C, Rp}, 77, 100.0f);
                     std::vector<uint8_t> codes(size_t(C * Rp));
                     for (size_t i = 0; i < codes.size(); ++i) codes[i] = ops::fp8_encode(v.f32()[i], ft);
                     Tensor x = e.out({R, C});
                     ops::fp8_dequantize_transposed(x, e.u8({C, Rp}, codes), e.uniform({1}, 0.1f, 2.0f), ft);
                     e.check("x", x);
                   }});
    }
  // Row-major codes (FP8 attention's outputs) back to x.
  // (37 x 64 and 5 x 16: the vectorized kernel, 8 codes per thread; 7 x 9: the elementwise one.)
  for (auto [R, C] : {std::pair<int64_t, int64_t>{37, 64}, {5, 16}, {7, 9}})
    for (ops::Fp8Type ft : {ops::Fp8Type::E4M3, ops::Fp8Type::E5M2}) {
      t.push_back({"fp8_dequantize", dims({R, C}) + " " + ops::fp8_type_name(ft), {F32, BF16}, [=](Env& e) {
                     const Tensor v = randn({R, C}, 78, 100.0f);
                     std::vector<uint8_t> codes(size_t(R * C));
                     for (size_t i = 0; i < codes.size(); ++i) codes[i] = ops::fp8_encode(v.f32()[i], ft);
                     Tensor x = e.out({R, C});
                     ops::fp8_dequantize(x, e.u8({R, C}, codes), e.uniform({1}, 0.1f, 2.0f), ft);
                     e.check("x", x);
                   }});
    }
  // The column sums of x from the quantization's own pass (the bias gradient of dout): tiles of
  // 64 rows and columns, so cover a partial row tile, several row tiles and a partial column tile.
  for (auto [R, C] : {std::pair<int64_t, int64_t>{37, 64}, {200, 144}, {130, 16}}) {
    t.push_back({"fp8_quantize", dims({R, C}) + " E5M2+col_sums", {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({R, C}, 3.0f);
                   Tensor q = e.out_exact({R, C}, DType::U8), s = e.out_as({1}, F32), none;
                   Tensor sums = e.accum("col_sums", {C});
                   ops::fp8_quantize(q, none, s, x, ops::Fp8Type::E5M2, Tensor(), sums);
                   e.check("scale_inv", s);
                 }});
  }
  for (auto [N, I, O] : {std::tuple<int64_t, int64_t, int64_t>{19, 32, 48}, {64, 64, 16}}) {
    const std::string shape = dims({N, I, O});
    t.push_back({"linear_forward_fp8", shape + "+bias+res", {BF16}, [=](Env& e) {
                   Tensor x = e.in({N, I}), w = e.in({O, I}, 0.3f), b = e.in({O}), r = e.in({N, O});
                   Tensor y = e.out({N, O});
                   ops::linear_forward_fp8(y, x, w, b, r, ops::Fp8Recipe{});
                   e.check("out", y);
                 }});
    t.push_back({"linear_backward_fp8", shape, {BF16}, [=](Env& e) {
                   Tensor x = e.in({N, I}), w = e.in({O, I}, 0.3f), dout = e.in({N, O}, 1e-2f);
                   Tensor dx = e.out({N, I});
                   Tensor dw = e.accum("dw", {O, I}, 1e-3f), db = e.accum("dbias", {O}, 1e-3f);
                   ops::linear_backward_fp8(dx, dw, db, dout, x, w, ops::Fp8Recipe{});
                   e.check("dx", dx);
                 }});
  }
}

void add_embedding_at(std::vector<Case>& t, int64_t N, int64_t V, int64_t C, const std::string& tag = "") {
  const std::string shape = dims({N, V, C}) + tag;
  auto ids = [N = N, V = V] { return rand_ints(N, 91, 0, int32_t(V)); };
  t.push_back({"embedding_forward", shape, {F32, BF16}, [=](Env& e) {
                 Tensor table = e.in({V, C}), y = e.out({N, C});
                 ops::embedding_forward(y, e.i32({N}, ids()), table);
                 e.check("out", y);
               }});
  t.push_back({"embedding_backward", shape, {F32, BF16}, [=](Env& e) {
                 Tensor dout = e.in({N, C});
                 Tensor dtable = e.accum("dtable", {V, C});
                 ops::embedding_backward(dtable, dout, e.i32({N}, ids()));
               }, 2e-2, {"dtable"}});
  t.push_back({"scale_rows_inplace", shape, {F32, BF16}, [=](Env& e) {
                 Tensor dh = e.in({N, C}), scale = e.uniform({N}, 0.0f, 2.0f);
                 ops::scale_rows_inplace(dh, scale);
                 e.check("dh", dh);
               }});
}

// ESM-2's token dropout over hidden width C (the row-scaling kernel picks its threads per row
// from C).
void add_token_dropout_at(std::vector<Case>& t, int64_t C, const std::string& tag = "") {
  for (const Layout& l : {kPacked, kPadded}) {
    for (int32_t mask_id : {32, -1}) {
      t.push_back({"esm_token_dropout_forward", l.name + " " + dims({l.n(), C}) + (mask_id < 0 ? " off" : "") + tag,
                   {F32, BF16}, [=](Env& e) {
                     const int64_t N = l.n();
                     std::vector<int32_t> ids = rand_ints(N, 92, 28, 34);  // some ids are the mask (32)
                     Tensor h = e.in({N, C}), scale = e.out_as({N}, F32);
                     ops::esm_token_dropout_forward(h, scale, e.i32({N}, ids), e.i32({l.b() + 1}, l.cu),
                                                    e.i32({l.b()}, l.lens), mask_id);
                     e.check("h", h);
                     e.check("scale_out", scale);
                   }});
    }
  }
}

void add_embedding(std::vector<Case>& t) {
  for (auto [N, V, C] : {std::tuple<int64_t, int64_t, int64_t>{13, 11, 24}, {64, 33, 320}, {5, 7, 9}})
    add_embedding_at(t, N, V, C);
  add_token_dropout_at(t, 40);
}

void add_norm_at(std::vector<Case>& t, int64_t N, int64_t C, const std::string& tag = "") {
  const std::string shape = dims({N, C}) + tag;
  for (bool with_bias : {true, false}) {
    t.push_back({"layernorm_forward", shape + (with_bias ? "+bias" : ""), {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({N, C}), w = e.in({C}), b = with_bias ? e.in({C}) : Tensor();
                   Tensor y = e.out({N, C}), mean = e.out_as({N}, F32), rstd = e.out_as({N}, F32);
                   ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f);
                   e.check("out", y);
                   e.check("mean", mean);
                   e.check("rstd", rstd);
                 }});
  }
  for (bool dres : {false, true}) {
    const std::string s = shape + (dres ? "+dres" : "");
    t.push_back({"layernorm_backward", s, {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({N, C}), w = e.in({C}), b = e.in({C}), dout = e.in({N, C});
                   Tensor res = dres ? e.in({N, C}) : Tensor();
                   Tensor y = e.out({N, C}), mean = e.out_as({N}, F32), rstd = e.out_as({N}, F32);
                   ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f);
                   Tensor dx = e.out({N, C});
                   Tensor dw = e.accum("dw", {C}), db = e.accum("db", {C});
                   ops::layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, res);
                   e.check("dx", dx);
                 }});
    t.push_back({"rmsnorm_backward", s, {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({N, C}), w = e.in({C}), dout = e.in({N, C});
                   Tensor res = dres ? e.in({N, C}) : Tensor();
                   Tensor y = e.out({N, C}), rstd = e.out_as({N}, F32);
                   ops::rmsnorm_forward(y, rstd, x, w, 1e-6f);
                   Tensor dx = e.out({N, C});
                   Tensor dw = e.accum("dw", {C});
                   ops::rmsnorm_backward(dx, dw, dout, x, w, rstd, res);
                   e.check("dx", dx);
                 }});
  }
  // dx_amax (FP8: the next quantization of dx skips its amax pass)
  t.push_back({"layernorm_backward", shape + "+dres+amax", {F32, BF16}, [=](Env& e) {
                 Tensor x = e.in({N, C}), w = e.in({C}), b = e.in({C}), dout = e.in({N, C}), res = e.in({N, C});
                 Tensor y = e.out({N, C}), mean = e.out_as({N}, F32), rstd = e.out_as({N}, F32);
                 ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f);
                 Tensor dx = e.out({N, C}), amax = e.out_as({1}, F32), none;
                 ops::layernorm_backward(dx, none, none, dout, x, w, mean, rstd, res, amax);
                 e.check("dx", dx);
                 e.check("amax", amax);
               }});
  t.push_back({"rmsnorm_backward", shape + "+amax", {F32, BF16}, [=](Env& e) {
                 Tensor x = e.in({N, C}), w = e.in({C}), dout = e.in({N, C});
                 Tensor y = e.out({N, C}), rstd = e.out_as({N}, F32);
                 ops::rmsnorm_forward(y, rstd, x, w, 1e-6f);
                 Tensor dx = e.out({N, C}), amax = e.out_as({1}, F32), none;
                 Tensor dw = e.accum("dw", {C});
                 ops::rmsnorm_backward(dx, dw, dout, x, w, rstd, none, amax);
                 e.check("dx", dx);
                 e.check("amax", amax);
               }});
  t.push_back({"rmsnorm_forward", shape + "+amax", {F32, BF16}, [=](Env& e) {
                 Tensor x = e.in({N, C}), w = e.in({C});
                 Tensor y = e.out({N, C}), rstd = e.out_as({N}, F32), amax = e.out_as({1}, F32);
                 ops::rmsnorm_forward(y, rstd, x, w, 1e-6f, amax);
                 e.check("out", y);
                 e.check("rstd", rstd);
                 e.check("amax", amax);
               }});
  t.push_back({"layernorm_forward", shape + "+bias+amax", {F32, BF16}, [=](Env& e) {
                 Tensor x = e.in({N, C}), w = e.in({C}), b = e.in({C});
                 Tensor y = e.out({N, C}), mean = e.out_as({N}, F32), rstd = e.out_as({N}, F32);
                 Tensor amax = e.out_as({1}, F32);
                 ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f, amax);
                 e.check("out", y);
                 e.check("amax", amax);
               }});
}

void add_norm(std::vector<Case>& t) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{5, 24}, {67, 320}, {3, 1000}, {130, 64}, {2, 7}}) add_norm_at(t, N, C);
}

void add_rope_apply_at(std::vector<Case>& t, int64_t H, int64_t D, const std::string& tag = "") {
  for (const Layout& l : {kPacked, kLong}) {
    const std::string shape = l.name + " " + dims({l.n(), H, D}) + tag;
    for (bool inverse : {false, true}) {
      t.push_back({"rope_apply", shape + (inverse ? " inverse" : ""), {F32, BF16}, [=](Env& e) {
                     Tensor x = e.in({l.n(), H, D});
                     Tensor f = Tensor::from_f32({D / 2}, inv_freq_of(D));
                     ops::rope_apply(x, e.i32({l.n()}, positions_of(l)), e.gpu() ? f.to(Device::CUDA) : f, inverse);
                     e.check("x", x);
                   }});
    }
  }
}

// The rope kernels over a packed q|k|v projection output of Hq query and Hkv key/value heads.
void add_rope_packed_at(std::vector<Case>& t, int64_t Hq, int64_t Hkv, int64_t D, const std::string& tag = "") {
  for (const Layout& l : {kPacked, kLong}) {
    const std::string shape = l.name + " " + dims({l.n(), Hq, Hkv, D}) + tag;
    const int64_t N = l.n(), row = (Hq + 2 * Hkv) * D;
    t.push_back({"rope_unpack_qkv", shape, {F32, BF16}, [=](Env& e) {
                   Tensor packed = e.in({N, row});
                   Tensor f = Tensor::from_f32({D / 2}, inv_freq_of(D));
                   Tensor q = e.out({N, Hq, D}), k = e.out({N, Hkv, D}), v = e.out({N, Hkv, D});
                   ops::rope_unpack_qkv(q, k, v, packed, e.i32({N}, positions_of(l)), e.gpu() ? f.to(Device::CUDA) : f);
                   e.check("q", q);
                   e.check("k", k);
                   e.check("v", v);
                 }});
    for (bool inverse : {false, true}) {
      t.push_back({"rope_qk_packed", shape + (inverse ? " inverse" : ""), {F32, BF16}, [=](Env& e) {
                     Tensor qkv = e.in({N, row});
                     Tensor f = Tensor::from_f32({D / 2}, inv_freq_of(D));
                     ops::rope_qk_packed(qkv, e.i32({N}, positions_of(l)), e.gpu() ? f.to(Device::CUDA) : f, Hq, Hkv,
                                         inverse);
                     e.check("qkv", qkv);
                   }});
    }
    // amax over whole rows, value heads included (FP8: the dq|dk|dv quantization reuses it)
    t.push_back({"rope_qk_packed", shape + " inverse+amax", {F32, BF16}, [=](Env& e) {
                   Tensor qkv = e.in({N, row}), amax = e.out_as({1}, F32);
                   Tensor f = Tensor::from_f32({D / 2}, inv_freq_of(D));
                   ops::rope_qk_packed(qkv, e.i32({N}, positions_of(l)), e.gpu() ? f.to(Device::CUDA) : f, Hq, Hkv,
                                       /*inverse=*/true, amax);
                   e.check("qkv", qkv);
                   e.check("amax", amax);
                 }});
    t.push_back({"rope_pack_qkv_grad", shape, {F32, BF16}, [=](Env& e) {
                   Tensor dq = e.in({N, Hq, D}), dk = e.in({N, Hkv, D}), dv = e.in({N, Hkv, D});
                   Tensor f = Tensor::from_f32({D / 2}, inv_freq_of(D));
                   Tensor dpacked = e.out({N, row});
                   ops::rope_pack_qkv_grad(dpacked, dq, dk, dv, e.i32({N}, positions_of(l)),
                                           e.gpu() ? f.to(Device::CUDA) : f);
                   e.check("dpacked", dpacked);
                 }});
  }
}

void add_rope(std::vector<Case>& t) {
  for (auto [H, D] : {std::pair<int64_t, int64_t>{3, 64}, {2, 24}, {1, 6}}) add_rope_apply_at(t, H, D);
  for (auto [Hq, Hkv, D] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 64}, {3, 3, 24}, {2, 1, 6}})
    add_rope_packed_at(t, Hq, Hkv, D);
}

struct Heads {
  int64_t Hq, Hkv, D;
  bool causal;
};

void add_attention_at(std::vector<Case>& t, const Layout& l, Heads a, const std::string& tag = "") {
  const std::string shape = l.name + " " + dims({l.n(), a.Hq, a.Hkv, a.D}) + (a.causal ? " causal" : "") +
                            (a.Hq != a.Hkv ? " gqa" : "") + tag;
  const int64_t N = l.n();
  auto forward = [=](Env& e, bool backward) {
    Tensor q = e.in({N, a.Hq, a.D}), k = e.in({N, a.Hkv, a.D}), v = e.in({N, a.Hkv, a.D});
    Tensor cu = e.i32({l.b() + 1}, l.cu), lens = e.i32({l.b()}, l.lens);
    ops::AttentionShape s;
    s.scale = 1.0f / std::sqrt(float(a.D));
    s.causal = a.causal;
    s.max_seqlen = l.max_len();
    Tensor out = e.out({N, a.Hq, a.D}), lse = e.out_as({N, a.Hq}, F32);
    ops::attention_forward(out, lse, q, k, v, cu, lens, s);
    if (!backward) {
      e.check("out", out);
      e.check("lse", lse);
      return;
    }
    Tensor dout = e.in({N, a.Hq, a.D});
    Tensor dq = e.out({N, a.Hq, a.D}), dk = e.out({N, a.Hkv, a.D}), dv = e.out({N, a.Hkv, a.D});
    ops::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu, lens, s);
    e.check("dq", dq);
    e.check("dk", dk);
    e.check("dv", dv);
  };
  t.push_back({"attention_forward", shape, {F32, BF16}, [=](Env& e) { forward(e, false); }});
  t.push_back({"attention_backward", shape, {F32, BF16}, [=](Env& e) { forward(e, true); }, 2e-2, {"dq"}});
  // The same from one packed projection output (cuDNN reads it through strides).
  auto packed = [=](Env& e, bool backward) {
    const ops::QkvHeads h{a.Hq, a.Hkv, a.D};
    Tensor qkv = e.in({N, (a.Hq + 2 * a.Hkv) * a.D});
    Tensor cu = e.i32({l.b() + 1}, l.cu), lens = e.i32({l.b()}, l.lens);
    const ops::AttentionShape s{1.0f / std::sqrt(float(a.D)), a.causal, l.max_len(), false};
    Tensor out = e.out({N, a.Hq, a.D}), lse = e.out_as({N, a.Hq}, F32);
    ops::attention_forward_packed(out, lse, qkv, h, cu, lens, s);
    if (!backward) {
      e.check("out", out);
      e.check("lse", lse);
      return;
    }
    Tensor dout = e.in({N, a.Hq, a.D}), dqkv = e.out(qkv.shape());
    ops::attention_backward_packed(dqkv, dout, qkv, h, out, lse, cu, lens, s);
    e.check("dqkv", dqkv);
  };
  t.push_back({"attention_forward_packed", shape, {F32, BF16}, [=](Env& e) { packed(e, false); }});
  t.push_back({"attention_backward_packed", shape, {F32, BF16}, [=](Env& e) { packed(e, true); }, 2e-2, {"dqkv"}});
}

void add_attention(std::vector<Case>& t) {
  for (const Layout& l : {kPacked, kPadded, kLong})
    for (Heads a : {Heads{2, 2, 64, false}, Heads{4, 2, 64, true}, Heads{2, 1, 24, false}, Heads{3, 3, 32, true},
                    Heads{2, 2, 20, false}})
      add_attention_at(t, l, a);
  struct Dec {
    int64_t n_new, cap, len, start, Hq, Hkv, D;
  };
  for (Dec d : {Dec{1, 64, 37, 36, 4, 2, 64}, Dec{5, 40, 21, 16, 2, 2, 24}, Dec{3, 300, 259, 256, 3, 1, 32}}) {
    t.push_back({"attention_decode",
                 dims({d.n_new, d.cap, d.len, d.start}) + " " + dims({d.Hq, d.Hkv, d.D}),
                 {F32, BF16},
                 [=](Env& e) {
                   Tensor q = e.in({d.n_new, d.Hq, d.D}), kc = e.in({d.cap, d.Hkv, d.D}), vc = e.in({d.cap, d.Hkv, d.D});
                   Tensor out = e.out({d.n_new, d.Hq, d.D});
                   ops::attention_decode(out, q, kc, vc, d.len, d.start, 1.0f / std::sqrt(float(d.D)));
                   e.check("out", out);
                 }});
  }
}

void add_activation_at(std::vector<Case>& t, int64_t N, int64_t F, const std::string& tag = "") {
  const std::string shape = dims({N, F}) + tag;
  for (ops::GeluKind kind : {ops::GeluKind::Erf, ops::GeluKind::Tanh}) {
    const std::string k = kind == ops::GeluKind::Erf ? " erf" : " tanh";
    t.push_back({"gelu_forward", shape + k, {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({N, F}, 2.0f), y = e.out({N, F});
                   ops::gelu_forward(y, x, kind);
                   e.check("out", y);
                 }});
    t.push_back({"gelu_backward", shape + k, {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({N, F}, 2.0f), dout = e.in({N, F}), dx = e.out({N, F});
                   ops::gelu_backward(dx, dout, x, kind);
                   e.check("dx", dx);
                 }});
  }
  t.push_back({"gelu_forward", shape + " erf+amax", {F32, BF16}, [=](Env& e) {
                 Tensor x = e.in({N, F}, 2.0f), y = e.out({N, F}), amax = e.out_as({1}, F32);
                 ops::gelu_forward(y, x, ops::GeluKind::Erf, amax);
                 e.check("out", y);
                 e.check("amax", amax);
               }});
  t.push_back({"gelu_backward", shape + " erf+amax", {F32, BF16}, [=](Env& e) {
                 Tensor x = e.in({N, F}, 2.0f), dout = e.in({N, F}), dx = e.out({N, F});
                 Tensor amax = e.out_as({1}, F32);
                 ops::gelu_backward(dx, dout, x, ops::GeluKind::Erf, amax);
                 e.check("dx", dx);
                 e.check("amax", amax);
               }});
  t.push_back({"swiglu_forward", shape, {F32, BF16}, [=](Env& e) {
                 Tensor g = e.in({N, F}, 2.0f), u = e.in({N, F}), y = e.out({N, F});
                 ops::swiglu_forward(y, g, u);
                 e.check("out", y);
               }});
  t.push_back({"swiglu_backward", shape, {F32, BF16}, [=](Env& e) {
                 Tensor g = e.in({N, F}, 2.0f), u = e.in({N, F}), dout = e.in({N, F});
                 Tensor dg = e.out({N, F}), du = e.out({N, F});
                 ops::swiglu_backward(dg, du, dout, g, u);
                 e.check("dgate", dg);
                 e.check("dup", du);
               }});
  t.push_back({"swiglu_forward_packed", shape + "+amax", {F32, BF16}, [=](Env& e) {
                 Tensor gu = e.in({N, 2 * F}, 2.0f), y = e.out({N, F}), amax = e.out_as({1}, F32);
                 ops::swiglu_forward_packed(y, gu, amax);
                 e.check("out", y);
                 e.check("amax", amax);
               }});
  t.push_back({"swiglu_backward_packed", shape + "+amax", {F32, BF16}, [=](Env& e) {
                 Tensor gu = e.in({N, 2 * F}, 2.0f), dout = e.in({N, F});
                 Tensor dgu = e.out({N, 2 * F}), amax = e.out_as({1}, F32);
                 ops::swiglu_backward_packed(dgu, dout, gu, amax);
                 e.check("dgate_up", dgu);
                 e.check("amax", amax);
               }});
}

void add_activation(std::vector<Case>& t) {
  for (auto [N, F] : {std::pair<int64_t, int64_t>{7, 13}, {64, 256}, {33, 344}, {1, 8}}) add_activation_at(t, N, F);
}

void add_loss(std::vector<Case>& t) {
  for (auto [N, V] : {std::pair<int64_t, int64_t>{9, 33}, {64, 1000}, {3, 5}, {130, 257}}) {
    t.push_back({"cross_entropy_forward_backward", dims({N, V}), {F32, BF16}, [=](Env& e) {
                   Tensor logits = e.in({N, V}, 3.0f);
                   std::vector<int32_t> labels = rand_ints(N, 93, 0, int32_t(V));
                   for (int64_t i = 0; i < N; i += 4) labels[size_t(i)] = ops::kIgnoreIndex;
                   Tensor loss = e.out_as({N}, F32), dlogits = e.out({N, V});
                   ops::cross_entropy_forward_backward(loss, dlogits, logits, e.i32({N}, labels), 1.0f / float(N));
                   e.check("token_loss", loss);
                   e.check("dlogits", dlogits);
                 }});
    t.push_back({"count_labels_accumulate", dims({N}), {F32}, [=](Env& e) {
                   std::vector<int32_t> labels = rand_ints(N, 95, 0, int32_t(V));
                   for (int64_t i = 0; i < N; i += 3) labels[size_t(i)] = ops::kIgnoreIndex;
                   Tensor count = e.accum("count", {1});
                   ops::count_labels_accumulate(count, e.i32({N}, labels));
                 }});
  }
}

void add_optim(std::vector<Case>& t) {
  ops::AdamWHyper h;
  h.lr = 1e-3f;
  h.step = 3;
  for (int64_t n : {int64_t(1), int64_t(37), int64_t(4096), int64_t(100003)}) {
    const std::string shape = dims({n});
    t.push_back({"adamw_step", shape, {F32}, [=](Env& e) {
                   Tensor p = e.in({n}), g = e.in({n}, 0.1f), m = e.in({n}, 0.01f);
                   Tensor v = e.uniform({n}, 0.0f, 0.01f);
                   ops::adamw_step(p, g, m, v, h);
                   e.check("param", p);
                   e.check("m", m);
                   e.check("v", v);
                 }});
    t.push_back({"sum_squares_accumulate", shape, {F32}, [=](Env& e) {
                   Tensor g = e.in({n});
                   Tensor acc = e.accum("acc", {1});
                   ops::sum_squares_accumulate(acc, g);
                 }});
    t.push_back({"scale_inplace", shape, {F32}, [=](Env& e) {
                   Tensor g = e.in({n});
                   ops::scale_inplace(g, 0.37f);
                   e.check("g", g);
                 }});
    for (float max_norm : {0.0f, 1.0f, 1e6f}) {
      t.push_back({"grad_norm_clip_coef", shape + " max_norm " + std::to_string(max_norm), {F32}, [=](Env& e) {
                     Tensor g = e.in({n});
                     Tensor norm = e.out_as({1}, F32), clip = e.out_as({1}, F32);
                     ops::grad_norm_clip_coef(norm, clip, g, max_norm);
                     e.check("norm", norm);
                     e.check("clip_coef", clip);
                   }});
      t.push_back({"grad_norm_clip_coef divisor", shape + " max_norm " + std::to_string(max_norm), {F32},
                   [=](Env& e) {
                     Tensor g = e.in({n}, 50.0f);
                     Tensor d = e.uniform({1}, 20.0f, 40.0f);
                     Tensor norm = e.out_as({1}, F32), clip = e.out_as({1}, F32);
                     ops::grad_norm_clip_coef(norm, clip, g, max_norm, d);
                     e.check("norm", norm);
                     e.check("clip_coef", clip);
                   }});
    }
    // F32 parameters with a BF16 compute copy; BF16: pure bf16 parameters (widened on the CPU).
    t.push_back({"adamw_flat", shape, {F32, BF16}, [=](Env& e) {
                   const bool bf16_params = e.dt() == BF16;
                   Tensor p = bf16_params ? e.exact({n}, BF16) : e.in({n});
                   Tensor g = e.in_as({n}, F32, 0.1f), m = e.in_as({n}, F32, 0.01f);
                   Tensor v = e.uniform({n}, 0.0f, 0.01f);
                   Tensor copy = bf16_params ? Tensor() : e.out_exact({n}, BF16);
                   Tensor ranges = e.i64({2, 2}, {0, n / 3, n / 2, n});
                   Tensor clip = e.uniform({1}, 0.5f, 1.0f);
                   ops::adamw_flat(p, copy, g, m, v, ranges, clip, h);
                   e.check("param", p);
                   if (copy.defined()) e.check("compute_copy", copy);
                   e.check("m", m);
                   e.check("v", v);
                 }});
  }
}

void add_elementwise(std::vector<Case>& t) {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(4096), int64_t(100003)}) {
    const std::string shape = dims({n});
    t.push_back({"add_inplace", shape, {F32, BF16}, [=](Env& e) {
                   Tensor y = e.in({n}), x = e.in({n});
                   ops::add_inplace(y, x);
                   e.check("y", y);
                 }});
    t.push_back({"sum_accumulate", shape, {F32, BF16}, [=](Env& e) {
                   Tensor x = e.in({n});
                   Tensor acc = e.accum("acc", {1});
                   ops::sum_accumulate(acc, x);
                 }});
    for (auto [from, to] : {std::pair<DType, DType>{F32, BF16}, {BF16, F32}, {F32, F32}, {BF16, BF16}}) {
      t.push_back({"cast", shape + " " + dtname(from) + "->" + dtname(to), {F32}, [=](Env& e) {
                     Tensor src = e.exact({n}, from), dst = e.out_exact({n}, to);
                     ops::cast(dst, src);
                     e.check("dst", dst);
                   }});
    }
  }
}

// ---- Every shipped model's widths ----
//
// Kernels pick their launch shapes from the widths they see (threads per row, vector widths,
// tiles), so a width no hand-picked case uses can take a path no case checks: ESM-2's token
// dropout once scaled some elements twice at hidden 1280 and 640 only. So each row-wise op also
// runs at the widths of every model config in configs/ (a few rows each; read from the
// configs, so a new model brings its widths along). GEMMs are cuBLASLt's, checked above.
void add_model_widths(std::vector<Case>& t) {
  const std::string dir = std::string(BIOFM_SOURCE_DIR) + "/configs";
  std::vector<std::string> names;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".yaml") names.push_back(f.path().stem().string());
  std::sort(names.begin(), names.end());
  if (names.empty()) fail("no model configs (*.yaml) in ", dir);  // the test fails rather than pass without them
  std::set<std::string> seen;  // (op family, widths) already added
  auto first = [&seen](const std::string& key) { return seen.insert(key).second; };
  for (const std::string& name : names) {
    const ModelShape m = load_train_config(dir, name, {"dataset.path=unused.fasta"}).model.config;
    const bool esm = m.hidden_act == "gelu";  // ESM-2: LayerNorm, GELU, bidirectional; else Llama
    const int64_t H = m.hidden_size, F = m.intermediate_size, V = m.vocab_size, N = 37;
    const std::string tag = " (" + name + ")";
    if (first("norm" + dims({H}))) add_norm_at(t, N, H, tag);
    if (first("embedding" + dims({V, H}))) add_embedding_at(t, N, V, H, tag);
    if (esm && first("dropout" + dims({H}))) add_token_dropout_at(t, H, tag);
    if (first("activation" + dims({F}))) add_activation_at(t, 5, F, tag);
    if (first("fp8" + dims({H}))) add_fp8_quantize_at(t, N, H, tag);
    if (first("fp8" + dims({F}))) add_fp8_quantize_at(t, N, F, tag);
    const Heads h{m.num_attention_heads, m.kv_heads(), m.head_dim(), !esm};
    if (first("heads" + dims({h.Hq, h.Hkv, h.D}) + (h.causal ? " causal" : ""))) {
      add_rope_apply_at(t, h.Hq, h.D, tag);
      add_rope_packed_at(t, h.Hq, h.Hkv, h.D, tag);
      add_attention_at(t, kPacked, h, tag);
    }
  }
}

const std::vector<Case>& table() {
  static const std::vector<Case> t = [] {
    std::vector<Case> v;
    add_gemm(v);
    add_fp8(v);
    add_fp8_quantize_gelu(v);
    add_norm_fp8(v);
    add_embedding(v);
    add_norm(v);
    add_rope(v);
    add_attention(v);
    add_activation(v);
    add_loss(v);
    add_optim(v);
    add_elementwise(v);
    add_model_widths(v);
    return v;
  }();
  return t;
}

// Max |a - b|, max |a - b| / |b| (over |b| > 1e-6), and ||a - b|| / ||b||.
struct Errors {
  double max_abs = 0, max_rel = 0, norm_rel = 0;
};
Errors errors(const Tensor& a, const Tensor& b) {
  Errors r;
  r.norm_rel = rel_error(a, b);
  for (int64_t i = 0, n = std::min(a.numel(), b.numel()); i < n; ++i) {
    const double d = std::fabs(double(a.f32()[i]) - double(b.f32()[i]));
    if (!(d <= r.max_abs)) r.max_abs = d;  // NaN sticks
    if (std::fabs(b.f32()[i]) > 1e-6) r.max_rel = std::max(r.max_rel, d / std::fabs(double(b.f32()[i])));
  }
  return r;
}

double max_abs_of(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(double(t.f32()[i])));
  return m;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.f32(), b.f32(), size_t(a.numel()) * sizeof(float)) == 0;
}

TEST(BackendOps, EveryOpMatchesTheCpuReference) {
  BIOFM_REQUIRE_GPU();
  int ran = 0, failed = 0;
  for (const Case& c : table()) {
    for (DType dt : c.dtypes) {
      const std::string what = c.op + " [" + c.shape + "] " + dtname(dt);
      const double bound = dt == F32 ? 1e-4 : c.bf16_tol;
      std::vector<std::pair<std::string, Tensor>> ref, got, again;
      try {
        Env cpu(Device::CPU, dt), gpu(Device::CUDA, dt), gpu2(Device::CUDA, dt);
        c.run(cpu);
        ref = cpu.collect();
        c.run(gpu);
        got = gpu.collect();
        c.run(gpu2);
        again = gpu2.collect();
      } catch (const std::exception& ex) {
        ADD_FAILURE() << what << ": threw: " << ex.what();
        ++failed;
        continue;
      }
      ++ran;
      bool ok = ref.size() == got.size() && again.size() == got.size();
      if (!ok) ADD_FAILURE() << what << ": " << ref.size() << " CPU outputs vs " << got.size() << " and " << again.size()
                             << " CUDA outputs";
      for (size_t i = 0; ok && i < ref.size(); ++i) {
        const Errors e = errors(got[i].second, ref[i].second);
        // A few wrong elements hardly move the norm: no element may be off by more than 4x the
        // bound of the output's largest magnitude either.
        const double elem_bound = 4 * bound * max_abs_of(ref[i].second);
        if (!(e.norm_rel < bound) || !(e.max_abs <= elem_bound)) {
          ADD_FAILURE() << what << " output " << ref[i].first << ": ||cuda-cpu||/||cpu|| " << e.norm_rel
                        << " (bound " << bound << "); max abs error " << e.max_abs << " (bound " << elem_bound
                        << "), max rel error " << e.max_rel << " (" << got[i].second.describe() << ")";
          ok = false;
        }
        // A race (threads writing one element, blocks overlapping) shows as bits that change
        // from one run to the next even where the values stay within the bounds.
        const bool atomic = std::find(c.atomic_outputs.begin(), c.atomic_outputs.end(), ref[i].first) !=
                            c.atomic_outputs.end();
        if (ok && !atomic && !same_bits(got[i].second, again[i].second)) {
          ADD_FAILURE() << what << " output " << ref[i].first << ": two GPU runs on the same inputs differ";
          ok = false;
        }
      }
      if (!ok) ++failed;
    }
  }
  std::printf("backend ops: %d (op, shape, dtype) entries ran, %d failed\n", ran, failed);
}

}  // namespace
}  // namespace biofm::cudatest
