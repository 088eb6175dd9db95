#include "biofm/models/blocks/stack.h"

#include <algorithm>

#include "biofm/core/profiling.h"
#include "biofm/core/side_stream.h"
#include "biofm/ops/options.h"

namespace biofm {

Tensor TransformerStack::forward_train(const Batch& b, Tensor x, std::vector<LayerActs>& acts,
                                       const LayerHook& hook, WeightUpdate* update) const {
  acts.assign(layers_.size(), LayerActs{});
  // What the next layer needs before it runs is prepared on the side stream while this layer
  // runs, and the compute stream joins before that layer: its part of an owed optimizer update
  // (ops.adamw_ahead; the caller decides) and, once per optimizer step, its FP8 weight codes
  // (ops.fp8_weights_ahead), in that order. Not with a hook (fsdp gathers a layer's weights in
  // BeforeForward, so they are not there ahead).
  const bool codes_ahead = !hook && ops::op_options().fp8_weights_ahead;
  for (int l = 0; l < num_layers(); ++l) {
    LayerActs& a = acts[size_t(l)];
    a.keep_fp8 = recompute_layers_ == 0;  // (recomputed and lean layers quantize again)
    Tensor x_out;
    NvtxRange range("layer %d forward", l + 1);
    if (codes_ahead || update) {
      side_stream::join();  // this layer's part, made beside the layer before (cheap when none)
      if (update && update->due(l)) update->apply(l);  // (the first layer; or no side stream)
      const int next = l + 1;
      const bool update_next = update && next < num_layers() && !hook && update->due(next);
      const bool codes_next = codes_ahead && next < num_layers() && layers_[size_t(next)].weight_codes_due();
      if (update_next || codes_next) {
        side_stream::Scope beside(true);
        if (beside.active()) {
          beside.enter();
          if (update_next) update->apply(next);
          if (codes_next) layers_[size_t(next)].make_weight_codes();
        }
      }
    }
    if (hook) hook(LayerEvent::BeforeForward, l);
    layers_[size_t(l)].forward(l, b, x, a, &x_out, nullptr);
    if (hook) hook(LayerEvent::AfterForward, l);
    if (l < recompute_layers_) {  // backward recomputes the rest from the layer input
      a = LayerActs{};
      a.x_in = x;
    } else if (recompute_layers_ > 0) {  // memory is short: drop what is cheap to redo
      layers_[size_t(l)].drop_cheap(a);
    }
    x = x_out;
  }
  return x;
}

Tensor TransformerStack::forward(const Batch& b, Tensor x, KvCache* cache, const LayerHook& hook) const {
  for (int l = 0; l < num_layers(); ++l) {
    LayerActs a;
    a.mlp.keep_pre = false;  // no backward reads it
    Tensor x_out;
    NvtxRange range("layer %d forward", l + 1);
    if (hook) hook(LayerEvent::BeforeForward, l);
    layers_[size_t(l)].forward(l, b, x, a, &x_out, cache);
    if (hook) hook(LayerEvent::AfterForward, l);
    x = x_out;
  }
  return x;
}

Tensor TransformerStack::forward_layers(const Batch& b, Tensor x, int layers,
                                        const std::function<void(int, const Tensor&)>& each) const {
  for (int l = 0; l < std::min(layers, num_layers()); ++l) {
    LayerActs a;
    a.mlp.keep_pre = false;
    Tensor x_out;
    NvtxRange range("layer %d forward", l + 1);
    layers_[size_t(l)].forward(l, b, x, a, &x_out, nullptr);
    x = x_out;
    if (each) each(l, x);
  }
  return x;
}

void TransformerStack::backward(const Batch& b, std::vector<LayerActs>& acts, Tensor& dx,
                                const LayerHook& hook) const {
  Tensor dx_amax;  // FP8: max |dx| from the layer above's norm backward, for this layer's W_out
  for (int l = num_layers() - 1; l >= 0; --l) {
    NvtxRange range("layer %d backward", l + 1);  // (a recomputed layer's forward included)
    if (hook) hook(LayerEvent::BeforeBackward, l);
    const bool below_fp8 = l > 0 && layers_[size_t(l - 1)].mlp_out_fp8();
    layers_[size_t(l)].backward(l, b, acts[size_t(l)], dx, &dx_amax, below_fp8);
    acts[size_t(l)] = LayerActs{};  // free as we go
    if (hook) {
      side_stream::join();  // the layer's weight gradients, before data parallelism reads them
      hook(LayerEvent::GradsReady, l);
    }
  }
}

}  // namespace biofm
