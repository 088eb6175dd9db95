// TransformerStack: the layer loop and its memory policies.
//
//  - keep everything (default): each layer keeps what its backward reads;
//  - recompute (the first `recompute_layers` layers): a layer keeps only its input and runs its
//    forward again in backward, without the last GEMM, whose output backward does not need;
//  - lean (with recompute on, the layers that are not recomputed): norm and activation
//    outputs are dropped after forward and redone in backward, one elementwise pass each.
// Backward walks the layers in reverse and frees each layer's activations as it goes. The
// layer hook (common.h) is called before and after each layer's forward, before each layer's
// backward and once its parameter gradients are final (data parallelism acts there).
#pragma once
#include <functional>
#include <limits>
#include <vector>

#include "biofm/models/blocks/layer.h"

namespace biofm {

class TransformerStack {
 public:
  TransformerStack() = default;
  explicit TransformerStack(std::vector<TransformerLayer> layers) : layers_(std::move(layers)) {}

  int num_layers() const { return int(layers_.size()); }
  // on: recompute the first `layers` layers (-1: all), the others lean; off: keep everything.
  void set_recompute(bool on, int layers = -1) {
    recompute_layers_ = !on ? 0 : layers < 0 ? std::numeric_limits<int>::max() : layers;
  }

  // Training forward: fills acts (one entry per layer) as the policy says; returns the output.
  // update (non-null): each layer's part of an owed parameter update is applied before the
  // layer runs, layer l + 1's on the side stream while layer l runs (where it can).
  Tensor forward_train(const Batch& b, Tensor x, std::vector<LayerActs>& acts, const LayerHook& hook = {},
                       WeightUpdate* update = nullptr) const;
  // Inference forward: keeps nothing (cache: incremental decoding).
  Tensor forward(const Batch& b, Tensor x, KvCache* cache = nullptr, const LayerHook& hook = {}) const;
  // Inference forward through the first `layers` layers only, handing each layer's output to
  // `each(l, x_out)` (l = 0 is the first layer); keeps nothing.
  Tensor forward_layers(const Batch& b, Tensor x, int layers,
                        const std::function<void(int, const Tensor&)>& each) const;
  // dx: the gradient w.r.t. the stack's output on entry, w.r.t. its input on exit.
  void backward(const Batch& b, std::vector<LayerActs>& acts, Tensor& dx, const LayerHook& hook = {}) const;

 private:
  std::vector<TransformerLayer> layers_;
  int recompute_layers_ = 0;  // the first this many layers recompute in backward
};

}  // namespace biofm
