// Training checkpoints on the GPU keep ops.gemm_autotune's choices (src/biofm/ops/gemm/tuning.h):
// a tuned run's checkpoint holds gemm_tuning.bin, listed in its manifest, and a resumed run
// takes those choices instead of timing the GEMMs again; a run that does not tune ignores it.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/io/atomic_file.h"
#include "biofm/models/esm2/model.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/gemm/tuning.h"
#include "biofm/train/checkpoint.h"
#include "biofm/train/optimizer.h"
#include "cuda_test_util.h"

using namespace biofm;

namespace {

std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

struct TinyRun {
  std::unique_ptr<Esm2Model> model;
  std::unique_ptr<AdamW> opt;
  TinyRun() {
    Esm2Config c;
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 128;
    model = std::make_unique<Esm2Model>(c, Device::CUDA, Precision::Bf16Mixed);
    model->params().init(7);
    opt = std::make_unique<AdamW>(model->params(), AdamWConfig{});
  }
  void step(const Batch& hb) {
    Tensor loss = Tensor::zeros({1}, DType::F32, Device::CUDA);
    const Tensor count = Tensor::from_f32({1}, {float(hb.num_label_tokens)}).to(Device::CUDA);
    model->params().zero_grad();
    model->forward_backward(hb.to(Device::CUDA), 1.0f, loss);
    opt->step(1e-3f, count);
  }
};

Batch one_batch() {
  static SequenceDataset data = SequenceDataset::load(src("data/proteins_sample.fasta"), ReaderOptions{});
  MlmOptions mo;
  mo.max_seq_length = 128;
  mo.max_tokens_per_batch = 1024;
  return MlmBatcher(data, mo).next();
}

}  // namespace

TEST(CudaCheckpoint, KeepsTunedGemmChoicesForTheResumedRun) {
  BIOFM_REQUIRE_GPU();
  testkit::ScopedOpOptions on([](ops::OpOptions& o) { o.gemm_autotune = true; });
  const std::string dir = testing::TempDir() + "/biofm_cuda_ckpt_tuning";
  std::filesystem::remove_all(dir);
  const Batch batch = one_batch();
  TinyRun first;
  first.step(batch);  // tunes the step's GEMM buckets
  const std::string table = ops::gemm_tuning_table();
  ASSERT_FALSE(table.empty());
  const std::string step_dir = save_training_checkpoint(dir, TrainerState{1, 0, "{}", "seed: 7\n"}, *first.model,
                                                        *first.opt, 2);
  ASSERT_EQ(read_file(step_dir + "/gemm_tuning.bin"), table);
  EXPECT_NE(read_file(step_dir + "/manifest.json").find("gemm_tuning.bin"), std::string::npos)
      << "the table is verified (size, CRC32) like every other checkpoint file";

  // What a new process has: no choices. Resume takes the checkpoint's; the next step times nothing.
  ops::clear_gemm_tuning();
  TinyRun second;
  const auto st = resume_training_checkpoint(dir, *second.model, *second.opt);
  ASSERT_TRUE(st.has_value());
  EXPECT_GT(st->gemm_choices, 0);
  EXPECT_EQ(ops::gemm_tuning_table(), table);
  const int64_t tunings = ops::cuda::gemm_autotune_tunings();
  second.step(batch);
  EXPECT_EQ(ops::cuda::gemm_autotune_tunings(), tunings) << "the resumed step took the saved choices";

  // A run that does not tune leaves the table alone.
  testkit::ScopedOpOptions off([](ops::OpOptions& o) { o.gemm_autotune = false; });
  TinyRun third;
  const auto st3 = resume_training_checkpoint(dir, *third.model, *third.opt);
  ASSERT_TRUE(st3.has_value());
  EXPECT_EQ(st3->gemm_choices, -1);
}
