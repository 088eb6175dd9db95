#include "biofm/models/language_model.h"

#include <filesystem>

#include "biofm/io/atomic_file.h"
#include "biofm/ops/loss/op.h"

namespace biofm {

LossSums sum_losses(const Tensor& token_loss, const Tensor& logits, const Tensor& labels, bool count_correct) {
  LossSums s;
  Tensor tl = token_loss.to(Device::CPU).to(DType::F32), lab = labels.to(Device::CPU);
  const int64_t T = tl.numel();
  for (int64_t i = 0; i < T; ++i) {
    if (lab.i32()[i] == ops::kIgnoreIndex) continue;
    s.loss_sum += tl.f32()[i];
    s.num_tokens += 1;
  }
  if (count_correct) {
    Tensor lg = logits.to(Device::CPU).to(DType::F32);
    const int64_t V = lg.size(1);
    for (int64_t i = 0; i < T; ++i) {
      const int32_t y = lab.i32()[i];
      if (y == ops::kIgnoreIndex) continue;
      const float* row = lg.f32() + i * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v;
      s.num_correct += best == y;
    }
  }
  return s;
}

HfDirContents read_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  HfDirContents c;
  c.config_path = (fs::path(dir) / "config.json").string();
  c.weights_path = (fs::path(dir) / "model.safetensors").string();
  if (!fs::exists(c.config_path)) fail("'", dir, "' is not a Hugging Face model directory: no config.json");
  if (!fs::exists(c.weights_path))
    fail("'", dir, "': no model.safetensors (sharded or pytorch_model.bin checkpoints are not supported; "
         "re-save with transformers' save_pretrained(safe_serialization=True, max_shard_size large enough))");
  c.config_json = read_file(c.config_path);
  return c;
}

std::function<std::string(const std::string&)> add_prefix_unless_present(const std::string& prefix) {
  return [prefix](const std::string& n) {
    if (n.rfind(prefix, 0) == 0 || n.rfind("lm_head.", 0) == 0) return n;
    return prefix + n;
  };
}

}  // namespace biofm
