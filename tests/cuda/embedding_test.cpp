// CUDA embedding lookup / backward and ESM-2 token dropout against the CPU reference
// (label "cuda": GPU machine only).
#include <gtest/gtest.h>

#include <numeric>

#include "biofm/ops/embedding/op.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

// Ids in [0, V) skewed like real batches: most rows draw from a handful of ids.
std::vector<int32_t> skewed_ids(int64_t n, int32_t V, uint64_t seed) {
  std::vector<int32_t> ids = rand_ints(n, seed, 0, V);
  const std::vector<int32_t> hot = rand_ints(n, seed + 1, 0, std::min<int32_t>(V, 6));
  const std::vector<int32_t> pick = rand_ints(n, seed + 2, 0, 10);
  for (int64_t i = 0; i < n; ++i)
    if (pick[size_t(i)] < 8) ids[size_t(i)] = hot[size_t(i)] * (V / std::min<int32_t>(V, 6));
  return ids;
}

}  // namespace

TEST(CudaEmbedding, ForwardMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  struct Case {
    int64_t N, V, C;
  };
  const std::vector<Case> cases = {{1, 33, 72},     {37, 33, 320},   {4096, 33, 1280},
                                   {37, 256, 2560}, {257, 33, 5120}, {37, 33, 33}};
  uint64_t seed = 1;
  for (const auto& c : cases) {
    for (const auto& dt : dtype_combos()) {
      seed += 7;
      Tensor table = round_to(randn({c.V, c.C}, seed), dt.param);
      std::vector<int32_t> idv = rand_ints(c.N, seed + 1, 0, int32_t(c.V));
      Tensor ids_h = Tensor::from_i32({c.N}, idv);
      Tensor ref = Tensor::empty({c.N, c.C}, DType::F32);
      ops::cpu::embedding_forward(ref, ids_h, table);
      Tensor out = Tensor::empty({c.N, c.C}, dt.act, Device::CUDA);
      poison(out);
      ops::cuda::embedding_forward(out, ids_h.to(Device::CUDA), to_device(table, dt.param));
      const std::string L = "embedding_forward " + combo_name(dt) + " N=" + std::to_string(c.N) +
                            " V=" + std::to_string(c.V) + " C=" + std::to_string(c.C);
      EXPECT_TRUE(close(L, to_host_f32(out), ref, tol(dt.act)));
    }
  }
}

TEST(CudaEmbedding, ForwardOutOfRangeIdGivesNanRow) {
  BIOFM_REQUIRE_GPU();
  const int64_t V = 33, C = 64;
  Tensor table = randn({V, C}, 5);
  Tensor out = Tensor::empty({3, C}, DType::F32, Device::CUDA);
  ops::cuda::embedding_forward(out, to_device_i32({3}, {4, 33, -1}), to_device(table, DType::F32));
  Tensor h = to_host_f32(out);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(h.f32()[c], table.f32()[4 * C + c]);
    EXPECT_TRUE(std::isnan(h.f32()[C + c]));
    EXPECT_TRUE(std::isnan(h.f32()[2 * C + c]));
  }
}

TEST(CudaEmbedding, BackwardMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  struct Case {
    int64_t N, V, C;
    bool skewed;
  };
  // V = 256 uniform: more distinct ids per block than shared slots (the overflow path);
  // V = 3000: beyond the slot map (global atomics); C = 33, 75: odd widths.
  const std::vector<Case> cases = {{1, 33, 72, false},      {37, 33, 320, false},
                                   {4096, 33, 1280, true},  {4096, 33, 320, false},
                                   {4096, 256, 2048, true}, {4096, 256, 320, false},
                                   {257, 33, 5120, true},   {37, 33, 33, false},
                                   {1000, 3000, 64, false}, {513, 33, 75, true}};
  uint64_t seed = 50;
  for (const auto& c : cases) {
    for (DType dt : {DType::F32, DType::BF16}) {
      seed += 7;
      Tensor dout = round_to(randn({c.N, c.C}, seed), dt);
      std::vector<int32_t> idv = c.skewed ? skewed_ids(c.N, int32_t(c.V), seed + 1)
                                          : rand_ints(c.N, seed + 1, 0, int32_t(c.V));
      Tensor ids_h = Tensor::from_i32({c.N}, idv);
      Tensor dtable0 = randn({c.V, c.C}, seed + 2);
      Tensor ref = dtable0.clone();
      ops::cpu::embedding_backward(ref, dout, ids_h);
      Tensor dtable = to_device(dtable0, DType::F32);
      ops::cuda::embedding_backward(dtable, to_device(dout, dt), ids_h.to(Device::CUDA));
      const std::string L = std::string("embedding_backward ") + dtname(dt) +
                            " N=" + std::to_string(c.N) + " V=" + std::to_string(c.V) +
                            " C=" + std::to_string(c.C);
      Tensor got = to_host_f32(dtable);
      EXPECT_TRUE(close(L, got, ref, 1e-5));
      EXPECT_TRUE(close(L + " increment", minus(got, dtable0), minus(ref, dtable0), 1e-5));
    }
  }
}

TEST(CudaEmbedding, BackwardSkipsOutOfRangeIds) {
  BIOFM_REQUIRE_GPU();
  const int64_t V = 33, C = 16;
  Tensor dout = randn({3, C}, 9);
  Tensor dtable = Tensor::zeros({V, C}, DType::F32, Device::CUDA);
  ops::cuda::embedding_backward(dtable, to_device(dout, DType::F32),
                                to_device_i32({3}, {5, 40, -3}));
  Tensor h = to_host_f32(dtable);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(h.f32()[v * C + c], v == 5 ? dout.f32()[c] : 0.0f);
}

namespace {

struct DropoutBatch {
  std::vector<int32_t> cu, lens, ids;
  int64_t N;
};

// Sequences of the given lengths in slots of the given sizes, `tail` extra rows after the
// last slot; ids in [4, 30] with ~15% mask (32), padding id 1.
DropoutBatch make_batch(const std::vector<int32_t>& lens, const std::vector<int32_t>& slots,
                        int32_t tail, uint64_t seed) {
  DropoutBatch b;
  b.lens = lens;
  b.cu = {0};
  for (int32_t s : slots) b.cu.push_back(b.cu.back() + s);
  b.N = b.cu.back() + tail;
  b.ids = rand_ints(b.N, seed, 4, 31);
  const std::vector<int32_t> r = rand_ints(b.N, seed + 1, 0, 100);
  for (int64_t i = 0; i < b.N; ++i)
    if (r[size_t(i)] < 15) b.ids[size_t(i)] = 32;
  for (size_t s = 0; s < lens.size(); ++s)
    for (int32_t i = b.cu[s] + lens[s]; i < b.cu[s + 1]; ++i) b.ids[size_t(i)] = 1;
  for (int64_t i = b.cu.back(); i < b.N; ++i) b.ids[size_t(i)] = 1;
  return b;
}

}  // namespace

TEST(CudaEmbedding, TokenDropoutMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  struct Case {
    const char* name;
    DropoutBatch batch;
  };
  // THD with odd lengths (a length-1 sequence, a fully masked one added below) and rows past
  // cu_seqlens[B]; BSHD with padding in every slot.
  std::vector<Case> cases;
  cases.push_back({"THD", make_batch({7, 1, 33, 100, 2, 511}, {7, 1, 33, 100, 2, 511}, 5, 11)});
  {
    DropoutBatch b = make_batch({3, 9}, {3, 9}, 0, 12);
    for (int i = 0; i < 3; ++i) b.ids[size_t(i)] = 32;  // every token of sequence 0 masked
    cases.push_back({"THD all-masked sequence", b});
  }
  cases.push_back({"BSHD", make_batch({50, 17, 1, 33}, {50, 50, 50, 50}, 0, 13)});
  cases.push_back(
      {"THD long", make_batch({1022, 1024, 700, 1300}, {1022, 1024, 700, 1300}, 16, 14)});
  uint64_t seed = 300;
  for (const auto& cs : cases) {
    const DropoutBatch& b = cs.batch;
    const int64_t B = int64_t(b.lens.size());
    Tensor ids_h = Tensor::from_i32({b.N}, b.ids);
    Tensor cu_h = Tensor::from_i32({B + 1}, b.cu), lens_h = Tensor::from_i32({B}, b.lens);
    for (int32_t mask_id : {32, -1}) {
      // 1280 and 640 (ESM-2 650M, 150M): 160 / 80 chunks of 8 per row, counts that do not divide
      // a 256-thread block (they once made two blocks scale some elements of a row twice).
      for (int64_t C : {int64_t(1280), int64_t(640), int64_t(320), int64_t(72), int64_t(33)}) {
        for (DType dt : {DType::F32, DType::BF16}) {
          seed += 3;
          Tensor h0 = round_to(randn({b.N, C}, seed), dt);
          // Masked and padding rows may hold anything, NaN included: they must come out 0.
          for (int64_t i = 0; i < b.N; ++i)
            if (b.ids[size_t(i)] == 32 || b.ids[size_t(i)] == 1) h0.f32()[i * C] = NAN;
          Tensor ref = h0.clone(), scale_ref = Tensor::empty({b.N}, DType::F32);
          ops::cpu::esm_token_dropout_forward(ref, scale_ref, ids_h, cu_h, lens_h, mask_id);
          Tensor h = to_device(h0, dt);
          Tensor scale = Tensor::empty({b.N}, DType::F32, Device::CUDA);
          poison(scale);
          ops::cuda::esm_token_dropout_forward(h, scale, ids_h.to(Device::CUDA),
                                               cu_h.to(Device::CUDA), lens_h.to(Device::CUDA),
                                               mask_id);
          const std::string L = std::string("token dropout ") + cs.name +
                                " mask_id=" + std::to_string(mask_id) + " C=" + std::to_string(C) +
                                " " + dtname(dt);
          EXPECT_TRUE(close(L + " h", to_host_f32(h), ref, tol(dt)));
          EXPECT_TRUE(close(L + " scale", to_host_f32(scale), scale_ref, 1e-7));

          // Backward of the dropout: dh *= scale.
          Tensor g0 = round_to(randn({b.N, C}, seed + 1), dt);
          Tensor gref = g0.clone();
          ops::cpu::scale_rows_inplace(gref, scale_ref);
          Tensor g = to_device(g0, dt);
          ops::cuda::scale_rows_inplace(g, scale);
          EXPECT_TRUE(close(L + " scale_rows_inplace", to_host_f32(g), gref, tol(dt)));
        }
      }
    }
  }
}
