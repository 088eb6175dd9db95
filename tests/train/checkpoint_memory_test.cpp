// Checkpoint save and resume of a ~300 MB model must not copy whole files or stores into host
// memory: the resident set may grow by at most the largest tensor plus 64 MB.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "biofm/models/esm2/model.h"
#include "biofm/train/checkpoint.h"

using namespace biofm;
namespace fs = std::filesystem;

namespace {

int64_t status_kb(const std::string& key) {  // a "Key:  N kB" line of /proc/self/status
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  return -1;
}

// Resets the peak resident set (VmHWM) to the current one.
bool reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return f.good() && status_kb("VmHWM") - status_kb("VmRSS") < 1024;
}

}  // namespace

TEST(TrainCheckpointMemory, SaveAndResumeStreamWithBoundedHostMemory) {
  Esm2Config c;  // 6 layers of hidden 1024, FFN 4096: 75.6M parameters, 302 MB in fp32
  c.hidden_size = 1024;
  c.num_hidden_layers = 6;
  c.num_attention_heads = 16;
  c.intermediate_size = 4096;
  Esm2Model model(c, Device::CPU);
  model.params().flat().fill_(0.5f);  // touch every page before measuring
  AdamW opt(model.params(), AdamWConfig{});
  opt.moment("exp_avg").fill_(0.25f);
  opt.moment("exp_avg_sq").fill_(0.125f);
  int64_t largest = 0;
  for (const ParamSpec& s : model.params().specs()) largest = std::max(largest, shape_numel(s.shape) * 4);
  ASSERT_GT(model.params().numel() * 4, int64_t(250) << 20);
  const int64_t limit_kb = (largest + (int64_t(64) << 20)) / 1024;

  const std::string dir = testing::TempDir() + "/biofm_ckpt_memory";
  fs::remove_all(dir);
  ASSERT_TRUE(reset_peak()) << "cannot reset VmHWM through /proc/self/clear_refs";
  int64_t before = status_kb("VmRSS");
  save_training_checkpoint(dir, {1, 1, "", ""}, model, opt, 1);
  const int64_t save_growth = status_kb("VmHWM") - before;
  EXPECT_LT(save_growth, limit_kb) << "save: peak RSS grew by " << save_growth << " kB";

  model.params().flat().fill_(0.0f);
  opt.moment("exp_avg").fill_(0.0f);
  ASSERT_TRUE(reset_peak());
  before = status_kb("VmRSS");
  auto st = resume_training_checkpoint(dir, model, opt);
  const int64_t load_growth = status_kb("VmHWM") - before;
  ASSERT_TRUE(st.has_value());
  EXPECT_LT(load_growth, limit_kb) << "resume: peak RSS grew by " << load_growth << " kB";
  const int64_t n = model.params().numel();
  EXPECT_EQ(model.params().param(model.params().size() - 1).f32()[0], 0.5f);
  EXPECT_EQ(opt.moment("exp_avg").f32()[n / 2], 0.25f);
  std::printf("[checkpoint memory] %.0f MB of parameters, largest tensor %.0f MB: peak RSS growth save %.1f MB, "
              "resume %.1f MB\n",
              double(n) * 4 / 1048576.0, double(largest) / 1048576.0, save_growth / 1024.0, load_growth / 1024.0);
  fs::remove_all(dir);
}
