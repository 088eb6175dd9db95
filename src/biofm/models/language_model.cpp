#include "biofm/models/language_model.h"

#include <cstdio>
#include <filesystem>

#include "biofm/io/atomic_file.h"
#include "biofm/models/hf_dir.h"
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

std::vector<Tensor> LanguageModel::layer_hidden_states(const Batch& b, const std::vector<int>& layers) {
  const int last = int(dims().layers);
  std::vector<Tensor> out;
  Tensor final_states;
  for (int l : layers) {
    if (l != last) fail(family(), " models give the final hidden states only (layer ", last, "), not layer ", l);
    if (!final_states.defined()) final_states = hidden_states(b);
    out.push_back(final_states);
  }
  return out;
}

std::string parameter_count_text(int64_t n) {
  char out[32];
  const double v = double(n);
  if (v >= 1e9) std::snprintf(out, sizeof out, "%.1fB", v / 1e9);
  else if (v >= 1e6) std::snprintf(out, sizeof out, "%.1fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(out, sizeof out, "%.1fK", v / 1e3);
  else std::snprintf(out, sizeof out, "%lld", (long long)n);
  return out;
}

void LanguageModel::settle_weights() const {
  if (!update_) return;
  for (int l = -1; l < int(dims().layers); ++l)
    if (update_->due(l)) update_->apply(l);
}

void LanguageModel::save_hf_dir(const std::string& dir) const {
  settle_weights();
  make_dirs_writable(dir);
  save_hf_metadata(dir);
  save_hf_weights(params(), dir, carried_);
}

}  // namespace biofm
