#include "biofm/train/optimizer.h"

#include <algorithm>

#include "biofm/dist/comm.h"

namespace biofm {

namespace {

// The decay ranges [start, end) inside [begin, end), shifted to start at begin.
Tensor shard_ranges(const Tensor& ranges, std::pair<int64_t, int64_t> shard, Device d) {
  const Tensor host = ranges.to(Device::CPU);
  std::vector<int64_t> out;
  for (int64_t r = 0; r < host.size(0); ++r) {
    const int64_t a = std::max(host.i64()[2 * r], shard.first), b = std::min(host.i64()[2 * r + 1], shard.second);
    if (a < b) out.insert(out.end(), {a - shard.first, b - shard.first});
  }
  Tensor t = Tensor::empty({int64_t(out.size() / 2), 2}, DType::I64);
  std::copy(out.begin(), out.end(), t.i64());
  return t.to(d);
}

Tensor slice(const Tensor& flat, std::pair<int64_t, int64_t> r) {
  return flat.defined() ? flat.flat_slice(r.first, {r.second - r.first}) : Tensor();
}

}  // namespace

std::pair<int64_t, int64_t> AdamW::shard_of(int64_t numel, int rank, int world) {
  return shard_range(numel, rank, world);
}

AdamW::AdamW(ParamStore& params, const AdamWConfig& cfg, Communicator* shard_over)
    : params_(params), cfg_(cfg), comm_(shard_over && shard_over->world_size() > 1 ? shard_over : nullptr) {
  const Device d = params.device();
  shard_ = comm_ ? shard_of(params.numel(), comm_->rank(), comm_->world_size()) : std::pair<int64_t, int64_t>{0, params.numel()};
  const int64_t n = shard_.second - shard_.first;
  m_ = Tensor::zeros({n}, DType::F32, d);
  v_ = Tensor::zeros({n}, DType::F32, d);
  norm_ = Tensor::zeros({1}, DType::F32, d);
  clip_coef_ = Tensor::zeros({1}, DType::F32, d);
  decay_ranges_ = comm_ ? shard_ranges(params.decay_ranges(), shard_, d) : params.decay_ranges();
  if (comm_) {
    shard_norms_ = Tensor::zeros({comm_->world_size()}, DType::F32, d);
    shard_clip_ = Tensor::zeros({1}, DType::F32, d);
  }
}

void AdamW::step(float lr, const Tensor& grad_divisor) {
  ++step_;
  ops::AdamWHyper h{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, step_};
  if (!comm_) {
    ops::grad_norm_clip_coef(norm_, clip_coef_, params_.grad_flat(), cfg_.max_grad_norm, grad_divisor);
    ops::adamw_flat(params_.flat(), params_.compute_flat(), params_.grad_flat(), m_, v_, decay_ranges_, clip_coef_, h);
    return;
  }
  // The global norm from the shards' norms: ‖(‖g_0‖, ..., ‖g_W-1‖)‖ = ‖g‖. (A sharded store,
  // fsdp, holds just this shard: its buffers start at the shard's first element.)
  const std::pair<int64_t, int64_t> local{shard_.first - params_.held().first, shard_.second - params_.held().first};
  const Tensor grad = slice(params_.grad_flat(), local);
  shard_norms_.zero_();
  Tensor mine = shard_norms_.flat_slice(comm_->rank(), {1});
  ops::grad_norm_clip_coef(mine, shard_clip_, grad, 0.0f);
  comm_->all_reduce_sum(shard_norms_);
  comm_->join();
  ops::grad_norm_clip_coef(norm_, clip_coef_, shard_norms_, cfg_.max_grad_norm, grad_divisor);
  Tensor p = slice(params_.flat(), local);
  Tensor c = slice(params_.compute_flat(), local);
  ops::adamw_flat(p, c, grad, m_, v_, decay_ranges_, clip_coef_, h);
  if (params_.sharded()) return;  // (fsdp gathers what each layer needs when it runs)
  broadcast_shards(params_.compute_flat().defined() ? params_.compute_flat() : params_.flat());
  comm_->join();
}

void AdamW::broadcast_shards(Tensor& flat) {
  comm_->group_begin();
  for (int r = 0; r < comm_->world_size(); ++r) {
    Tensor s = slice(flat, shard_of(params_.numel(), r, comm_->world_size()));
    if (s.numel() > 0) comm_->broadcast(s, r);
  }
  comm_->group_end();
}

void AdamW::gather_params() {
  if (!comm_ || params_.sharded()) return;  // (fsdp: writers gather a full copy instead, train/fsdp.h)
  broadcast_shards(params_.flat());
  comm_->join();
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
