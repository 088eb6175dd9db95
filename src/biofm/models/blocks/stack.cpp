#include "biofm/models/blocks/stack.h"

#include <algorithm>

#include "biofm/core/profiling.h"
#include "biofm/core/side_stream.h"
#include "biofm/ops/options.h"

namespace biofm {

Tensor TransformerStack::forward_train(const Batch& b, Tensor x, std::vector<LayerActs>& acts,
                                       const LayerHook& hook) const {
  acts.assign(layers_.size(), LayerActs{});
  // ops.fp8_weights_ahead: the next layer's FP8 weight codes (once per optimizer step) are made
  // on the side stream while this layer runs; the compute stream joins before that layer. Not
  // with a hook (fsdp gathers a layer's weights in BeforeForward, so they are not there ahead).
  const bool ahead = !hook && ops::op_options().fp8_weights_ahead;
  for (int l = 0; l < num_layers(); ++l) {
    LayerActs& a = acts[size_t(l)];
    a.keep_fp8 = recompute_layers_ == 0;  // (recomputed and lean layers quantize again)
    Tensor x_out;
    NvtxRange range("layer %d forward", l + 1);
    if (ahead) {
      side_stream::join();  // this layer's codes, made beside the layer before (cheap when none)
      if (l + 1 < num_layers() && layers_[size_t(l + 1)].weight_codes_due()) {
        side_stream::Scope beside(true);
        if (beside.active()) {
          beside.enter();
          layers_[size_t(l + 1)].make_weight_codes();
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
