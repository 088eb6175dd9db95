#include "biofm/train/optimizer.h"

namespace biofm {

AdamW::AdamW(ParamStore& params, const AdamWConfig& cfg) : params_(params), cfg_(cfg) {
  const Device d = params.device();
  m_ = Tensor::zeros({params.numel()}, DType::F32, d);
  v_ = Tensor::zeros({params.numel()}, DType::F32, d);
  norm_ = Tensor::zeros({1}, DType::F32, d);
  clip_coef_ = Tensor::zeros({1}, DType::F32, d);
  decay_ranges_ = params.decay_ranges();
}

void AdamW::step(float lr, const Tensor& grad_divisor) {
  ++step_;
  ops::grad_norm_clip_coef(norm_, clip_coef_, params_.grad_flat(), cfg_.max_grad_norm, grad_divisor);
  ops::AdamWHyper h{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, step_};
  ops::adamw_flat(params_.flat(), params_.compute_flat(), params_.grad_flat(), m_, v_, decay_ranges_,
                  clip_coef_, h);
}

double AdamW::read_grad_norm() const { return double(norm_.to(Device::CPU).f32()[0]); }

std::map<std::string, Tensor> AdamW::state() const { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }

Tensor& AdamW::moment(const std::string& name) {
  if (name == "exp_avg") return m_;
  if (name == "exp_avg_sq") return v_;
  fail("AdamW has no state '", name, "' (exp_avg, exp_avg_sq)");
}

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

}  // namespace biofm
