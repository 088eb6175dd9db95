#include "biofm/train/fsdp.h"

#include <algorithm>

#include "biofm/dist/comm.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/train/optimizer.h"

namespace biofm {

namespace {

using Range = std::pair<int64_t, int64_t>;

bool empty(Range r) { return r.first >= r.second; }
int64_t size(Range r) { return r.second - r.first; }
Tensor part_of(const Tensor& flat, int64_t at, int64_t n) { return flat.flat_slice(at, {n}); }

constexpr size_t kRestSlot = 2;  // store residents 0, 1: the layer slots; 2...: the rest's ranges

}  // namespace

FsdpSync::FsdpSync(Communicator& comm, LanguageModel& model, ParallelStrategy strategy, bool bf16_reduce)
    : comm_(comm),
      model_(model),
      store_(model.params()),
      layers_(int(model.dims().layers)),
      bf16_reduce_(bf16_reduce),
      shard_weights_(strategy == ParallelStrategy::Fsdp) {
  if (strategy != ParallelStrategy::Fsdp && strategy != ParallelStrategy::Zero2)
    fail("FsdpSync: strategy ", strategy_name(strategy), " shards no gradients");
  const int64_t numel = store_.numel();
  int64_t biggest = 0;
  for (int l = 0; l < layers_; ++l) {
    layer_ranges_.push_back(model.layer_param_range(l));
    biggest = std::max(biggest, size(layer_ranges_.back()));
  }
  std::vector<Range> covered = layer_ranges_;
  std::sort(covered.begin(), covered.end());
  int64_t at = 0;
  for (const Range& r : covered) {
    if (r.first > at) rest_ranges_.push_back({at, r.first});
    at = std::max(at, r.second);
  }
  if (at < numel) rest_ranges_.push_back({at, numel});
  for (const Range& r : rest_ranges_) rest_numel_ += size(r);

  // Shard first, so that the whole buffers are gone before the slots are allocated. (The trainer
  // shards zero2's gradients at build time already: they never coexist with the moments.)
  const Range mine = AdamW::shard_of(numel, comm.rank(), comm.world_size());
  if (!shard_weights_) {
    if (store_.sharded()) fail("zero2: the parameter store was built sharded (fsdp's)");
    if (!store_.gradients_sharded()) store_.shard_gradients(mine.first, mine.second);
  } else if (!store_.sharded()) {
    store_.keep_only(mine.first, mine.second);
  }
  const Range held = shard_weights_ ? store_.held() : store_.grad_held();
  if (held != mine)
    fail(strategy_name(strategy), ": the parameter store holds [", held.first, ", ", held.second, ") of the ",
         shard_weights_ ? "parameters" : "gradients", ", rank ", comm.rank(), " owns [", mine.first, ", ", mine.second, ")");

  const Device d = store_.device();
  const DType w = store_.compute_dtype();
  for (int s = 0; s < 2; ++s) {
    if (shard_weights_) slot_w_[s] = Tensor::zeros({std::max<int64_t>(biggest, 1)}, w, d);
    slot_g_[s] = Tensor::zeros({std::max<int64_t>(biggest, 1)}, DType::F32, d);
  }
  if (shard_weights_) rest_w_ = Tensor::zeros({std::max<int64_t>(rest_numel_, 1)}, w, d);
  rest_g_ = Tensor::zeros({std::max<int64_t>(rest_numel_, 1)}, DType::F32, d);
  if (bf16_reduce_) {
    for (Tensor& w : wire_) w = Tensor::zeros({std::max<int64_t>(biggest, 1)}, DType::BF16, d);
    rest_wire_ = Tensor::zeros({std::max<int64_t>(rest_numel_, 1)}, DType::BF16, d);
  }

  at = 0;
  for (size_t i = 0; i < rest_ranges_.size(); ++i) {
    const int64_t n = size(rest_ranges_[i]);
    Tensor rest_w = shard_weights_ ? part_of(rest_w_, at, n) : Tensor();
    store_.set_resident(kRestSlot + i, {rest_ranges_[i].first, rest_w, part_of(rest_g_, at, n)});
    at += n;
  }
  model_.set_layer_hook([this](LayerEvent e, int layer) { on_event(e, layer); });
}

FsdpSync::~FsdpSync() { model_.set_layer_hook({}); }

std::vector<Range> FsdpSync::ranges_of(int unit) const {
  return unit == kRest ? rest_ranges_ : std::vector<Range>{layer_ranges_.at(size_t(unit))};
}

Range FsdpSync::owned(Range r, int rank) const {
  const Range s = AdamW::shard_of(store_.numel(), rank, comm_.world_size());
  return {std::max(r.first, s.first), std::min(r.second, s.second)};
}

Tensor FsdpSync::local_weights(Range part) {
  Tensor& base = store_.has_compute_copy() ? store_.compute_flat() : store_.flat();
  return part_of(base, part.first - store_.held().first, size(part));
}

void FsdpSync::gather(int unit, int slot) {
  Tensor& dst_base = unit == kRest ? rest_w_ : slot_w_[slot];
  comm_.group_begin();
  int64_t at = 0;
  for (const Range& r : ranges_of(unit)) {
    for (int k = 0; k < comm_.world_size(); ++k) {
      const Range part = owned(r, k);
      if (empty(part)) continue;
      Tensor dst = part_of(dst_base, at + part.first - r.first, size(part));
      comm_.broadcast_from(k == comm_.rank() ? local_weights(part) : Tensor(), dst, k);
    }
    at += size(r);
  }
  comm_.group_end();
  const int64_t m = comm_.mark();
  if (unit == kRest) {
    comm_.wait_for(m);
    rest_valid_ = true;
    return;
  }
  slot_layer_[slot] = unit;
  gather_mark_[slot] = m;
  gather_waited_[slot] = false;
}

void FsdpSync::ready(int layer, bool with_grads) {
  if (!shard_weights_ && !with_grads) return;  // (zero2: nothing to gather)
  const int s = layer % 2;
  const Range r = layer_ranges_[size_t(layer)];
  ParamStore::Resident res{r.first, Tensor(), Tensor()};
  if (shard_weights_) {
    if (slot_layer_[s] != layer) gather(layer, s);
    if (!gather_waited_[s]) comm_.wait_for(gather_mark_[s]), gather_waited_[s] = true;
    res.weight = part_of(slot_w_[s], 0, size(r));
  }
  if (with_grads) {
    settle_slot(s);  // (the slot's previous gradients must have left before they are overwritten)
    res.grad = part_of(slot_g_[s], 0, size(r));
    res.grad.zero_();
  }
  store_.set_resident(size_t(s), res);
}

void FsdpSync::reduce(int unit, const Tensor& grads, Tensor wire) {
  const int me = comm_.rank();
  const int64_t held = store_.grad_held().first;
  Tensor& local = store_.grad_flat();
  if (wire.defined()) {
    // bf16: summed in place in the wire copy; the owners add it into their shards afterwards.
    wire = part_of(wire, 0, grads.numel());
    ops::cast(wire, grads);
  } else {
    // The owners add what they hold (earlier micro batches'), so the reduction's result is the total.
    int64_t at = 0;
    for (const Range& r : ranges_of(unit)) {
      const Range part = owned(r, me);
      if (!empty(part)) {
        Tensor acc = part_of(grads, at + part.first - r.first, size(part));
        ops::add_inplace(acc, part_of(local, part.first - held, size(part)));
      }
      at += size(r);
    }
  }
  const Tensor& src = wire.defined() ? wire : grads;
  comm_.group_begin();
  int64_t at = 0;
  for (const Range& r : ranges_of(unit)) {
    for (int k = 0; k < comm_.world_size(); ++k) {
      const Range part = owned(r, k);
      if (empty(part)) continue;
      Tensor sent = part_of(src, at + part.first - r.first, size(part));
      Tensor dst = k != me ? Tensor() : wire.defined() ? sent : part_of(local, part.first - held, size(part));
      comm_.reduce_sum_to(sent, dst, k);
    }
    at += size(r);
  }
  comm_.group_end();
}

void FsdpSync::add_reduced(int unit, Tensor& scratch, const Tensor& wire) {
  const int64_t held = store_.grad_held().first;
  int64_t at = 0;
  for (const Range& r : ranges_of(unit)) {
    const Range part = owned(r, comm_.rank());
    if (!empty(part)) {
      Tensor wide = part_of(scratch, at + part.first - r.first, size(part));
      ops::cast(wide, part_of(wire, at + part.first - r.first, size(part)));
      Tensor dst = part_of(store_.grad_flat(), part.first - held, size(part));
      ops::add_inplace(dst, wide);
    }
    at += size(r);
  }
}

void FsdpSync::settle_slot(int s) {
  if (!reduce_pending_[s]) return;
  comm_.wait_for(reduce_mark_[s]);
  reduce_pending_[s] = false;
  if (bf16_reduce_) add_reduced(slot_layer_grads_[s], slot_g_[s], wire_[s]);
}

void FsdpSync::on_event(LayerEvent e, int layer) {
  switch (e) {
    case LayerEvent::BeforeForward:
      if (!shard_weights_) break;  // (zero2: the weights are whole)
      if (layer == kRest) {
        if (!rest_valid_) gather(kRest, 0);
        for (int l = 0; l < std::min(2, layers_); ++l)
          if (slot_layer_[l] != l) gather(l, l);
      } else {
        ready(layer, false);
      }
      break;
    case LayerEvent::AfterForward:
      if (shard_weights_ && layer + 2 < layers_) gather(layer + 2, layer % 2);  // its slot is free now
      break;
    case LayerEvent::BeforeBackward:
      ready(layer, true);
      break;
    case LayerEvent::GradsReady: {
      if (layer == kRest) break;  // (reduced once per step, in finish)
      const int s = layer % 2;
      reduce(layer, part_of(slot_g_[s], 0, size(layer_ranges_[size_t(layer)])), wire_[s]);
      reduce_mark_[s] = comm_.mark();
      reduce_pending_[s] = true;
      slot_layer_grads_[s] = layer;
      if (shard_weights_ && layer - 2 >= 0) gather(layer - 2, s);
      break;
    }
  }
}

void FsdpSync::begin_step() { rest_g_.zero_(); }

void FsdpSync::skip_forward() {
  on_event(LayerEvent::BeforeForward, kRest);
  for (int l = 0; l < layers_; ++l) {
    on_event(LayerEvent::BeforeForward, l);
    on_event(LayerEvent::AfterForward, l);
  }
}

void FsdpSync::skip_micro_batch() {
  skip_forward();
  for (int l = layers_ - 1; l >= 0; --l) {
    on_event(LayerEvent::BeforeBackward, l);
    on_event(LayerEvent::GradsReady, l);
  }
  on_event(LayerEvent::GradsReady, kRest);
}

void FsdpSync::finish(Tensor& sums) {
  reduce(kRest, rest_g_, rest_wire_);
  comm_.all_reduce_sum(sums);
  comm_.join();
  for (int s = 0; s < 2; ++s) settle_slot(s);  // (after join: their reductions have completed)
  if (bf16_reduce_) add_reduced(kRest, rest_g_, rest_wire_);
  // The optimizer changes the weights: every gathered copy is stale from here on.
  slot_layer_[0] = slot_layer_[1] = -1;
  rest_valid_ = false;
}

void FsdpSync::gather_full_copy(int root) {
  if (!shard_weights_) fail("FsdpSync::gather_full_copy: zero2's weights are whole on every rank");
  const int me = comm_.rank();
  const int64_t numel = store_.numel(), chunk = int64_t(1) << 26;  // 64 Mi elements a round
  Tensor host = me == root ? Tensor::empty({numel}, store_.dtype(), Device::CPU) : Tensor();
  Tensor staging = Tensor::empty({std::min(chunk, numel)}, store_.dtype(), store_.device());
  for (int64_t c = 0; c < numel; c += chunk) {
    const Range r{c, std::min(numel, c + chunk)};
    // Masters offloaded to the host: this rank's part goes to the device first, before the group
    // (group_begin orders the collectives after the compute stream's work queued up to it; a
    // copy queued inside the group would race the broadcast).
    const Range mine = owned(r, me);
    const bool staged = !empty(mine) && store_.flat().device() != staging.device();
    if (staged)
      part_of(staging, mine.first - c, size(mine))
          .copy_from(part_of(store_.flat(), mine.first - store_.held().first, size(mine)));
    comm_.group_begin();
    for (int k = 0; k < comm_.world_size(); ++k) {
      const Range part = owned(r, k);
      if (empty(part)) continue;
      Tensor dst = part_of(staging, part.first - c, size(part));
      Tensor src = k != me ? Tensor()
                   : staged ? dst
                            : part_of(store_.flat(), part.first - store_.held().first, size(part));
      comm_.broadcast_from(src, dst, k);
    }
    comm_.group_end();
    comm_.join();
    if (me == root) {
      Tensor out = part_of(host, c, size(r));
      out.copy_from(part_of(staging, 0, size(r)));
    }
  }
  if (me == root) store_.set_full_copy(host);
}

}  // namespace biofm
