#include "biofm/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "biofm/core/device_memory.h"
#include "biofm/dist/comm.h"
#include "biofm/models/language_model.h"

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

// Zeroed host memory that asynchronous copies to and from `d` can use: pinned for a GPU.
Tensor host_buffer(const Shape& shape, DType dtype, Device d) {
  Tensor t = d == Device::CUDA ? Tensor::pinned(shape, dtype) : Tensor::empty(shape, dtype);
  t.zero_();
  return t;
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
  m_ = cfg.offload ? host_buffer({n}, DType::F32, d) : Tensor::zeros({n}, DType::F32, d);
  v_ = cfg.offload ? host_buffer({n}, DType::F32, d) : Tensor::zeros({n}, DType::F32, d);
  norm_ = Tensor::zeros({1}, DType::F32, d);
  clip_coef_ = Tensor::zeros({1}, DType::F32, d);
  decay_ranges_ = comm_ ? shard_ranges(params.decay_ranges(), shard_, d) : params.decay_ranges();
  if (comm_) {
    shard_norms_ = Tensor::zeros({comm_->world_size()}, DType::F32, d);
    shard_clip_ = Tensor::zeros({1}, DType::F32, d);
  }
  if (!cfg.offload) return;
  host_ = std::make_unique<HostState>();
  host_->grad = host_buffer({n}, DType::F32, d);
  host_->clip = host_buffer({1}, DType::F32, d);
  host_->decay_ranges = decay_ranges_.to(Device::CPU);
  if (params.has_compute_copy()) {
    // The masters move (all that the store holds: under zero1/zero2 the other shards too, which
    // gather_params refreshes); forward and backward read the compute copy, which stays.
    host_->compute = host_buffer({n}, DType::BF16, d);
    params.move_master(host_buffer({params.held().second - params.held().first}, params.dtype(), d));
    host_->moved_master = true;
  } else {
    host_->param = host_buffer({n}, params.dtype(), d);
  }
}

int64_t AdamW::offloaded_bytes() const {
  if (!host_) return 0;
  const ParamStore& ps = params_;
  return int64_t(m_.nbytes() + v_.nbytes() + (host_->moved_master ? ps.flat().nbytes() : 0));
}

void AdamW::step(float lr, const Tensor& grad_divisor) {
  settle();  // (an update still owed: no pass of the model ran since the last step)
  ++step_;
  ops::AdamWHyper h{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, step_};
  // This rank's shard of the store's buffers (all of them when not sharded; a sharded store
  // holds just this shard: its buffers start at the shard's first element; under zero2 only the
  // gradient buffer is sharded).
  const std::pair<int64_t, int64_t> local{shard_.first - params_.held().first, shard_.second - params_.held().first};
  const int64_t g0 = params_.grad_held().first;
  const Tensor grad = slice(params_.grad_flat(), {shard_.first - g0, shard_.second - g0});
  if (!comm_) {
    ops::grad_norm_clip_coef(norm_, clip_coef_, grad, cfg_.max_grad_norm, grad_divisor);
  } else {
    // The global norm from the shards' norms: ‖(‖g_0‖, ..., ‖g_W-1‖)‖ = ‖g‖.
    shard_norms_.zero_();
    Tensor mine = shard_norms_.flat_slice(comm_->rank(), {1});
    ops::grad_norm_clip_coef(mine, shard_clip_, grad, 0.0f);
    comm_->all_reduce_sum(shard_norms_);
    comm_->join();
    ops::grad_norm_clip_coef(norm_, clip_coef_, shard_norms_, cfg_.max_grad_norm, grad_divisor);
  }
  if (!parts_.empty()) {  // owed, applied part by part (apply_ahead_in)
    owed_hyper_ = h;
    params_.announce_change();
    for (Part& part : parts_) part.owed = true;
    owed_parts_ = int(parts_.size());
    return;
  }
  Tensor p = slice(params_.flat(), local);
  Tensor c = slice(params_.compute_flat(), local);
  if (host_)
    update_on_host(p, c, grad, h);
  else
    ops::adamw_flat(p, c, grad, m_, v_, decay_ranges_, clip_coef_, h);
  if (!comm_ || params_.sharded()) return;  // (fsdp gathers what each layer needs when it runs)
  broadcast_shards(params_.compute_flat().defined() ? params_.compute_flat() : params_.flat());
  comm_->join();
}

void AdamW::apply_ahead_in(LanguageModel& model) {
  if (comm_ || host_) fail("AdamW: the update applied ahead needs an optimizer that is neither sharded nor offloaded");
  // The layers' ranges in layout order; what lies between and around them is layer -1's.
  std::vector<Part> layers;
  for (int l = 0; l < int(model.dims().layers); ++l) layers.push_back({l, model.layer_param_range(l), Tensor()});
  std::sort(layers.begin(), layers.end(), [](const Part& a, const Part& b) { return a.range < b.range; });
  parts_.clear();
  int64_t at = 0;
  for (const Part& p : layers) {
    if (p.range.first < at) fail("AdamW: layer ", p.layer, "'s parameters overlap another layer's");
    if (p.range.first > at) parts_.push_back({-1, {at, p.range.first}, Tensor()});
    parts_.push_back(p);
    at = p.range.second;
  }
  if (at < params_.numel()) parts_.push_back({-1, {at, params_.numel()}, Tensor()});
  for (Part& p : parts_) p.decay_ranges = shard_ranges(params_.decay_ranges(), p.range, params_.device());
  owed_parts_ = 0;
  model.set_weight_update(this);
}

bool AdamW::due(int layer) const {
  if (owed_parts_ == 0) return false;
  for (const Part& p : parts_)
    if (p.layer == layer && p.owed) return true;
  return false;
}

void AdamW::apply(int layer) {
  if (owed_parts_ == 0) return;
  for (Part& p : parts_)
    if (p.layer == layer && p.owed) apply_part(p);
}

void AdamW::settle() {
  if (owed_parts_ == 0) return;
  for (Part& p : parts_)
    if (p.owed) apply_part(p);
}

void AdamW::drop_owed() {
  for (Part& p : parts_) p.owed = false;
  owed_parts_ = 0;
}

void AdamW::apply_part(Part& part) {
  const std::pair<int64_t, int64_t> r = part.range;
  Tensor p = slice(params_.flat_in_parts(), r);
  Tensor c = slice(params_.has_compute_copy() ? params_.compute_flat_in_parts() : Tensor(), r);
  Tensor g = slice(params_.grad_flat(), r), m = slice(m_, r), v = slice(v_, r);
  ops::adamw_flat(p, c, g, m, v, part.decay_ranges, clip_coef_, owed_hyper_);
  g.zero_();  // (the next step's gradients accumulate here; TrainStep does not zero them)
  part.owed = false;
  --owed_parts_;
}

void AdamW::update_on_host(Tensor& p, Tensor& c, const Tensor& grad, const ops::AdamWHyper& h) {
  HostState& hs = *host_;
  hs.grad.copy_from_async(grad);
  hs.clip.copy_from_async(clip_coef_);
  if (hs.param.defined()) hs.param.copy_from_async(p);
  // The one wait of an offloaded step: the host needs the gradients it is about to read.
  if (params_.device() == Device::CUDA) device_synchronize();
  if (!std::isfinite(hs.clip.f32()[0])) return;  // non-finite gradients: nothing changes (as adamw_flat)
  Tensor& master = hs.param.defined() ? hs.param : p;
  ops::adamw_flat(master, hs.compute, hs.grad, m_, v_, hs.decay_ranges, hs.clip, h);
  // What forward reads goes back, queued on the compute stream ahead of the next step's work; the
  // host writes these buffers again only after the next step's wait, so they stay intact until read.
  if (hs.param.defined())
    p.copy_from_async(hs.param);
  else
    c.copy_from_async(hs.compute);
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
  settle();
  if (!comm_ || params_.sharded()) return;  // (fsdp: writers gather a full copy instead, train/fsdp.h)
  if (host_ && host_->moved_master) return gather_host_masters();
  broadcast_shards(params_.flat());
  comm_->join();
}

void AdamW::gather_host_masters() {
  // The collectives need device memory: each shard passes through a bounded staging buffer.
  Tensor& flat = params_.flat();
  const int world = comm_->world_size();
  const auto [b0, e0] = shard_of(params_.numel(), 0, world);  // (the first shard is the largest)
  const int64_t chunk = std::max<int64_t>(1, std::min(e0 - b0, int64_t(1) << 24));
  Tensor staging = Tensor::empty({chunk}, DType::F32, params_.device());
  for (int r = 0; r < world; ++r) {
    const auto [b, e] = shard_of(params_.numel(), r, world);
    for (int64_t at = b; at < e; at += chunk) {
      const int64_t len = std::min(chunk, e - at);
      Tensor s = staging.flat_slice(0, {len}), h = flat.flat_slice(at, {len});
      if (r == comm_->rank()) s.copy_from(h);
      comm_->broadcast(s, r);
      comm_->join();
      if (r != comm_->rank()) h.copy_from(s);
    }
  }
}

double AdamW::read_grad_norm() const { return double(norm_.to(Device::CPU).f32()[0]); }

std::map<std::string, Tensor> AdamW::state() const { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }

Tensor& AdamW::moment(const std::string& name) {
  drop_owed();  // (what is loaded into the moment replaces the update; the parameters are loaded too)
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
  drop_owed();  // (the loaded state replaces an update still owed)
  m_.copy_from(st.at("exp_avg"));
  v_.copy_from(st.at("exp_avg_sq"));
  step_ = steps_taken;
}

}  // namespace biofm
