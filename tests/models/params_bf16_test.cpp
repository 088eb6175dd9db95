// ParamStore with a BF16 master buffer (precision "bf16": no fp32 copy of the parameters):
// init, load and export round trips, the AdamW step over it, and the CPU backend's refusal.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "biofm/models/esm2/model.h"
#include "biofm/models/language_model.h"
#include "biofm/models/params.h"
#include "biofm/train/optimizer.h"
#include "testing.h"

using namespace biofm;

namespace {

std::vector<ParamSpec> specs() {
  return {
      {"emb.weight", {7, 5}, Init::Normal, 0.5f, true, 2},
      {"norm.weight", {5}, Init::Ones, 0, false},
      {"norm.bias", {5}, Init::Zeros, 0, false},
      {"proj.weight", {3, 5}, Init::Normal, 0.02f, true},
      {"proj.bias", {3}, Init::Zeros, 0, false},
  };
}

// Element-wise bit equality of two CPU tensors of the same dtype.
void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.numel(), b.numel()) << what;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (a.dtype() == DType::BF16)
      ASSERT_EQ(a.bf()[i], b.bf()[i]) << what << " element " << i;
    else
      ASSERT_EQ(std::bit_cast<uint32_t>(a.f32()[i]), std::bit_cast<uint32_t>(b.f32()[i])) << what << " element " << i;
  }
}

}  // namespace

TEST(ParamsBf16, InitIsTheF32InitRounded) {
  ParamStore a(specs(), Device::CPU), b(specs(), Device::CPU, DType::BF16);
  a.init(42);
  b.init(42);
  EXPECT_EQ(a.dtype(), DType::F32);
  EXPECT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.flat().dtype(), DType::BF16);
  EXPECT_EQ(b.grad_flat().dtype(), DType::F32);
  EXPECT_FALSE(b.compute_flat().defined());
  ASSERT_EQ(a.numel(), b.numel());
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b.param(i).dtype(), DType::BF16) << b.spec(i).name;
    EXPECT_EQ(b.weight(i).dtype(), DType::BF16) << b.spec(i).name;
    EXPECT_EQ(b.grad(i).dtype(), DType::F32) << b.spec(i).name;
    EXPECT_EQ(b.param(i).shape(), b.spec(i).shape);
  }
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(b.flat().bf()[i], f32_to_bf16(a.flat().f32()[i])) << i;
  // Ones, zeros and the zeroed padding row survive rounding exactly.
  EXPECT_EQ(bf16_to_f32(b.param("norm.weight").bf()[3]), 1.0f);
  for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(bf16_to_f32(b.param("emb.weight").bf()[2 * 5 + j]), 0.0f);
  // Same decay ranges as the F32 store; no compute copy on top of bf16 masters.
  const Tensor ra = a.decay_ranges(), rb = b.decay_ranges();
  ASSERT_EQ(ra.numel(), rb.numel());
  for (int64_t i = 0; i < ra.numel(); ++i) EXPECT_EQ(ra.i64()[i], rb.i64()[i]);
  EXPECT_THROW(b.enable_compute_copy(), Error);
}

TEST(ParamsBf16, ExportLoadRoundTrip) {
  ParamStore b(specs(), Device::CPU, DType::BF16);
  b.init(7);
  // F32 export (checkpoints, HF dirs) is exact; BF16 export is the stored bits.
  const auto f32 = b.export_tensors(DType::F32);
  const auto bf = b.export_tensors(DType::BF16);
  for (size_t i = 0; i < b.size(); ++i) {
    const std::string& name = b.spec(i).name;
    ASSERT_EQ(f32.at(name).dtype(), DType::F32);
    ASSERT_EQ(bf.at(name).dtype(), DType::BF16);
    ASSERT_EQ(f32.at(name).shape(), b.spec(i).shape);
    expect_same_bits(bf.at(name), b.param(i).clone(), name);
    expect_same_bits(f32.at(name).to(DType::BF16), b.param(i).clone(), name);
  }
  // Loading the F32 export (a checkpoint) or the BF16 export back gives the same bits.
  for (const auto* src : {&f32, &bf}) {
    SafetensorsFile f;
    f.tensors = *src;
    f.source = "roundtrip";
    ParamStore c(specs(), Device::CPU, DType::BF16);
    c.load(f, nullptr);
    expect_same_bits(c.flat(), b.flat(), "reloaded flat");
  }
  // An F32 store loading the export gets the bf16 values exactly.
  SafetensorsFile f;
  f.tensors = f32;
  ParamStore a(specs(), Device::CPU);
  a.load(f, nullptr);
  expect_same_bits(a.flat().to(DType::BF16), b.flat(), "f32 store from bf16 export");
  expect_same_bits(a.flat(), b.flat().to(DType::F32), "widened");
  // A BF16 store loading F32 values that are not bf16 rounds them to nearest even.
  ParamStore r(specs(), Device::CPU);
  r.init(8);
  SafetensorsFile rf;
  rf.tensors = r.export_tensors(DType::F32);
  ParamStore rb(specs(), Device::CPU, DType::BF16);
  rb.load(rf, nullptr);
  expect_same_bits(rb.flat(), r.flat().to(DType::BF16), "rounded on load");
}

// AdamW over a BF16 store: one step equals the step over an F32 store holding the same
// values, rounded to bf16; the moments agree bit for bit.
TEST(ParamsBf16, AdamWStepOverBf16Store) {
  ParamStore b(specs(), Device::CPU, DType::BF16);
  b.init(3);
  ParamStore a(specs(), Device::CPU);
  SafetensorsFile f;
  f.tensors = b.export_tensors(DType::F32);
  a.load(f, nullptr);
  const Tensor g = testkit::randn({a.numel()}, 5, 0.1f);
  a.grad_flat().copy_from(g);
  b.grad_flat().copy_from(g);
  AdamWConfig cfg;
  cfg.lr = 1e-2f;
  cfg.weight_decay = 0.1f;
  AdamW oa(a, cfg), ob(b, cfg);
  oa.step(1e-2f);
  ob.step(1e-2f);
  EXPECT_EQ(oa.read_grad_norm(), ob.read_grad_norm());
  expect_same_bits(b.flat(), a.flat().to(DType::BF16), "params after one step");
  expect_same_bits(ob.state().at("exp_avg"), oa.state().at("exp_avg"), "exp_avg");
  expect_same_bits(ob.state().at("exp_avg_sq"), oa.state().at("exp_avg_sq"), "exp_avg_sq");
}

TEST(ParamsBf16, CpuBackendRefusesBf16Models) {
  Esm2Config c;
  c.hidden_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 32;
  try {
    Esm2Model m(c, Device::CPU, Precision::Bf16);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 precision needs the CUDA backend"), std::string::npos) << e.what();
  }
  EXPECT_EQ(master_dtype(Precision::Bf16), DType::BF16);
  EXPECT_EQ(master_dtype(Precision::Bf16Mixed), DType::F32);
  EXPECT_STREQ(precision_name(Precision::Bf16), "bf16");
}

// weight_concat / grad_concat: adjacent parameters as one stacked view of the same memory.
TEST(Params, ConcatIsAViewOfAdjacentParameters) {
  std::vector<ParamSpec> specs = {{"a", {2, 3}}, {"b", {1, 3}}, {"c", {4}}, {"d", {2, 3}}};
  specs[0].fuse_with_next = specs[1].fuse_with_next = true;
  ParamStore ps(specs, Device::CPU);
  ps.init(1);
  Tensor ab = ps.weight_concat({"a", "b"});
  EXPECT_EQ(ab.shape(), (Shape{3, 3}));
  EXPECT_EQ(ab.f32(), ps.param("a").f32());
  EXPECT_EQ(ab.f32() + 6, ps.param("b").f32());
  EXPECT_EQ(ps.grad_concat({"a", "b"}).f32(), ps.grad("a").f32());
  EXPECT_THROW(ps.weight_concat({"a", "d"}), Error);  // not adjacent
  EXPECT_THROW(ps.weight_concat({"c", "d"}), Error);  // not marked as a fused group
  EXPECT_THROW(ps.weight_concat({"b", "c"}), Error);  // trailing shapes differ
}

// swap_grad_buffer moves the gradients (values included) into memory someone else owns
// (Tensor::borrowed: data-parallel reduction in a communicator's registered buffer) and back.
TEST(Params, GradientsMoveIntoABorrowedBufferAndBack) {
  ParamStore ps(specs(), Device::CPU);
  Tensor g = ps.grad("proj.weight");
  for (int64_t i = 0; i < g.numel(); ++i) g.f32()[i] = float(i) + 0.5f;
  std::vector<float> outside(size_t(ps.grad_flat().numel()), -1.0f);
  const Tensor borrowed = Tensor::borrowed(outside.data(), {int64_t(outside.size())}, DType::F32, Device::CPU);
  Tensor own = ps.swap_grad_buffer(borrowed);
  EXPECT_EQ(ps.grad_flat().f32(), outside.data());
  EXPECT_EQ(ps.grad("proj.weight").f32()[3], 3.5f);  // the values came along
  ps.grad("proj.weight").f32()[3] = 9.0f;             // writes land in the borrowed memory
  EXPECT_EQ(outside[size_t(ps.grad("proj.weight").f32() - outside.data()) + 3], 9.0f);
  EXPECT_THROW(ps.swap_grad_buffer(Tensor::zeros({3}, DType::F32)), Error);  // wrong size
  ps.swap_grad_buffer(own);
  EXPECT_EQ(ps.grad_flat().f32(), own.f32());
  EXPECT_EQ(ps.grad("proj.weight").f32()[3], 9.0f);
  EXPECT_THROW(Tensor::borrowed(nullptr, {1}, DType::F32, Device::CPU), Error);
}
