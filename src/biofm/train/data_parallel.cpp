#include "biofm/train/data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "biofm/dist/comm.h"
#include "biofm/ops/elementwise/op.h"

namespace biofm {

const char* strategy_name(ParallelStrategy s) {
  switch (s) {
    case ParallelStrategy::Ddp: return "ddp";
    case ParallelStrategy::Zero1: return "zero1";
    case ParallelStrategy::Zero2: return "zero2";
    case ParallelStrategy::Fsdp: return "fsdp";
  }
  return "?";
}

bool optimizer_sharded(ParallelStrategy s) { return s != ParallelStrategy::Ddp; }

namespace {

using Range = std::pair<int64_t, int64_t>;

bool empty(Range r) { return r.first >= r.second; }
Tensor slice(const Tensor& flat, Range r) { return flat.flat_slice(r.first, {r.second - r.first}); }

}  // namespace

GradientSync::GradientSync(Communicator& comm, LanguageModel& model, const DataParallelOptions& o)
    : comm_(comm), model_(model), o_(o) {
  if (o_.strategy != ParallelStrategy::Ddp && o_.strategy != ParallelStrategy::Zero1)
    fail("GradientSync: ", strategy_name(o_.strategy), " shards the gradients (FsdpSync, train/fsdp.h)");
  const Tensor& g = model.params().grad_flat();
  // The buffer the reductions run on: the gradients, or (bf16_reduce) a bf16 copy of them; in
  // the communicator's registered memory when asked for and available.
  const bool bf16_wire = o_.bf16_reduce && g.dtype() == DType::F32;
  const DType wire_dtype = bf16_wire ? DType::BF16 : g.dtype();
  if (o_.nccl_symmetric && g.device() == Device::CUDA && g.dtype() == DType::F32)
    registered_ = comm_.alloc_registered(size_t(g.numel()) * dtype_size(wire_dtype));
  if (registered_) {
    Tensor t = Tensor::borrowed(registered_, {g.numel()}, wire_dtype, Device::CUDA);
    if (bf16_wire)
      bf16_grads_ = t;
    else
      store_grads_ = model.params().swap_grad_buffer(t);
  } else if (bf16_wire) {
    bf16_grads_ = Tensor::empty({g.numel()}, DType::BF16, g.device());
  }
  // Layers last to first (backward's order), merged while contiguous up to bucket_bytes.
  const int64_t elem = int64_t(dtype_size(g.dtype()));
  std::vector<Range> covered;
  for (int l = int(model.dims().layers) - 1; l >= 0; --l) {
    const Range r = model.layer_param_range(l);
    if (empty(r)) continue;
    covered.push_back(r);
    Bucket* last = plan_.empty() ? nullptr : &plan_.back();
    if (last && r.second == last->range.first && (last->range.second - last->range.first) * elem < o_.bucket_bytes)
      *last = {{r.first, last->range.second}, l};
    else
      plan_.push_back({r, l});
  }
  // Then whatever no layer covers (embeddings, final norm, head): issued at finish.
  std::sort(covered.begin(), covered.end());
  int64_t at = 0;
  for (const Range& r : covered) {
    if (r.first > at) plan_.push_back({{at, r.first}, -1});
    at = std::max(at, r.second);
  }
  if (at < g.numel()) plan_.push_back({{at, g.numel()}, -1});
  model_.set_layer_hook([this](LayerEvent e, int layer) {
    if (e == LayerEvent::GradsReady && layer >= 0) on_layer_ready(layer);
  });
}

GradientSync::~GradientSync() {
  model_.set_layer_hook({});
  if (!registered_) return;
  try {
    if (store_grads_.defined()) model_.params().swap_grad_buffer(store_grads_);
    bf16_grads_ = Tensor();
    comm_.free_registered(registered_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: releasing the registered gradient buffer: %s\n", e.what());
  }
}

void GradientSync::arm() { armed_ = true; }

void GradientSync::on_layer_ready(int layer) {
  if (!armed_) return;
  // Backward finishes layers last to first: the bucket ending with this layer is complete.
  while (next_ < plan_.size() && plan_[next_].last_layer >= 0 && plan_[next_].last_layer >= layer)
    launch(plan_[next_++].range);
}

void GradientSync::launch(Range range) {
  Tensor grads = slice(model_.params().grad_flat(), range);
  Tensor wire = grads;
  if (bf16_grads_.defined()) {
    wire = slice(bf16_grads_, range);
    ops::cast(wire, grads);
  }
  comm_.all_reduce_sum(wire);
}

void GradientSync::finish(Tensor& sums) {
  while (next_ < plan_.size()) launch(plan_[next_++].range);
  comm_.all_reduce_sum(sums);
  comm_.join();
  if (bf16_grads_.defined()) ops::cast(model_.params().grad_flat(), bf16_grads_);  // widened back
  next_ = 0;
  armed_ = false;
}

}  // namespace biofm
