#include "biofm/train/optimizer.h"

#include <cmath>

namespace biofm {

AdamW::AdamW(ParamStore& params, const AdamWConfig& cfg) : params_(params), cfg_(cfg) {
  m_ = Tensor::zeros({params.numel()}, DType::F32, params.device());
  v_ = Tensor::zeros({params.numel()}, DType::F32, params.device());
}

void AdamW::step(float lr) {
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamSpec& s = params_.spec(i);
    ops::AdamWHyper h{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, s.decay ? cfg_.weight_decay : 0.0f, step_};
    Tensor p = params_.param(i), g = params_.grad(i);
    Tensor m = m_.flat_slice(params_.offset(i), s.shape), v = v_.flat_slice(params_.offset(i), s.shape);
    ops::adamw_step(p, g, m, v, h);
  }
}

std::map<std::string, Tensor> AdamW::state() const { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }

void AdamW::load_state(const std::map<std::string, Tensor>& st, int64_t steps_taken) {
  for (const char* k : {"exp_avg", "exp_avg_sq"}) {
    auto it = st.find(k);
    if (it == st.end()) fail("optimizer state has no '", k, "'");
    if (it->second.numel() != m_.numel())
      fail("optimizer state '", k, "' has ", it->second.numel(), " elements, model needs ", m_.numel());
  }
  m_.copy_from(st.at("exp_avg"));
  v_.copy_from(st.at("exp_avg_sq"));
  step_ = steps_taken;
}

double global_grad_norm(const ParamStore& params) {
  Tensor acc = Tensor::zeros({1}, DType::F32, params.device());
  ops::sum_squares_accumulate(acc, params.grad_flat());
  return std::sqrt(double(acc.to(Device::CPU).f32()[0]));
}

void clip_grad_norm(ParamStore& params, double norm, double max_norm) {
  if (max_norm <= 0) return;
  double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) ops::scale_inplace(params.grad_flat(), float(coef));
}

}  // namespace biofm
