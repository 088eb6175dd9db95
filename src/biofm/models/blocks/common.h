// What every block of a model shares: the parameter store, the activation dtype and the FP8
// recipe (BlockContext, owned by the model), and ParamRef, a block's handle on its parameters.
//
// Blocks (linear.h, norm.h, attention.h, mlp.h, embedding_head.h, layer.h, stack.h) have an
// explicit forward and backward, like the ops they call: activation gradients are
// overwritten, parameter gradients accumulate (+=) into the store's gradient buffer.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "biofm/models/params.h"
#include "biofm/ops/fp8/recipe.h"
#include "biofm/ops/fp8/stats.h"
#include "biofm/ops/gemm/op.h"

namespace biofm {

class Communicator;

// Whether t's data starts on a 16-byte boundary (an undefined t counts as aligned): what the
// vectorized CUDA kernels and cuBLASLt's FP8 GEMMs need of their operands.
inline bool aligned16(const Tensor& t) { return !t.defined() || reinterpret_cast<uintptr_t>(t.raw()) % 16 == 0; }

// Points in a forward or backward pass where data-parallel training acts on a layer's
// parameters: fsdp gathers a layer's weights before it runs and releases them after; ddp/zero
// start reducing a layer's gradients once backward has made them final for the micro batch.
// Layer -1 stands for the parameters outside the layers (embedding, final norm, head):
// BeforeForward(-1) opens every forward pass, GradsReady(-1) closes every backward pass.
enum class LayerEvent { BeforeForward, AfterForward, BeforeBackward, GradsReady };
using LayerHook = std::function<void(LayerEvent event, int layer)>;

// An update of the parameters that is owed but not yet written: the optimizer's step applied
// part by part, each layer's part in time for the layer's next forward (train/optimizer.h,
// ops.adamw_ahead). Layer -1 stands for the parameters outside the layers, as above. The model's
// training forward applies layer l + 1's part on the side stream while layer l runs; every other
// pass applies what is left first (LanguageModel::settle_weights).
class WeightUpdate {
 public:
  virtual ~WeightUpdate() = default;
  virtual bool due(int layer) const = 0;
  // Queues the part's update (and the zeroing of its gradients) on the current stream.
  virtual void apply(int layer) = 0;
};

struct BlockContext {
  ParamStore* params = nullptr;
  DType act_dtype = DType::F32;            // activations: F32, or BF16 in the bf16 precisions
  // What each transformer layer's projections run in (ops/fp8/recipe.h); empty: the compute
  // precision everywhere.
  std::vector<ops::LayerQuant> layer_quant;
  uint64_t fp8_epoch = 0;  // bumped when layer_quant changes (the Linears' code caches compare it)
  // DelayedScaling state of every quantized tensor: 3 rows (input, weight, output gradient) per
  // projection of the layers, projection p of layer l at rows (4l + p)·3 ... (ops/fp8/delayed.h).
  Tensor delayed_history, delayed_scale_amax;  // F32 [rows, L], [rows]
  // FP8 attention (LayerQuant::fp8_dpa): each layer's attention state (F32 [layers,
  // ops::kFp8AttentionSlots], ops/attention/op.h), and whether its backward has measured its
  // gradients' amaxes yet (host flags: a layer's first backward calibrates).
  Tensor fp8_attention_state;
  mutable std::vector<char> fp8_attention_calibrated;
  // Set on the steps that log quantization statistics (ops/fp8/stats.h): the layers' Linears
  // add each quantized tensor's statistics (host copies: slow, hence only then).
  ops::QuantStatsCollector* stats = nullptr;
  // Set by the model for its backward pass (ops.wgrad_stream, CUDA): the layers' Linears queue
  // their weight and bias gradients on the side stream (core/side_stream.h); the model joins
  // it before anything reads those gradients.
  bool grads_beside = false;
  // Context parallelism (data/context_parallel.h): the group whose ranks share each batch's
  // sequences; the attention blocks gather the group's rows through it. Null: no such group.
  Communicator* cp_group = nullptr;

  // The layer's quantization, or null for the compute precision (also for layer < 0: the
  // embedding and the head always run in the compute precision, as in the recipes).
  const ops::LayerQuant* quant_of(int layer) const {
    if (layer < 0 || size_t(layer) >= layer_quant.size()) return nullptr;
    const ops::LayerQuant& q = layer_quant[size_t(layer)];
    return q.format == ops::LayerFormat::Compute ? nullptr : &q;
  }

  Device device() const { return params->device(); }
  Tensor act(const Shape& s) const { return Tensor::empty(s, act_dtype, device()); }
  Tensor f32(const Shape& s) const { return Tensor::empty(s, DType::F32, device()); }
};

// One parameter of the table, or several adjacent ones read as one tensor stacked along the
// first dimension (a fused projection: q|k|v, gate|up; see ParamSpec::fuse_with_next).
// Names are resolved, and adjacency checked, once; an empty name list is "absent".
class ParamRef {
 public:
  ParamRef() = default;
  ParamRef(const ParamStore& store, const std::vector<std::string>& names);
  ParamRef(const ParamStore& store, const std::string& name)
      : ParamRef(store, name.empty() ? std::vector<std::string>{} : std::vector<std::string>{name}) {}

  bool defined() const { return count_ > 0; }
  // The parameter as forward/backward read it (compute copy in mixed precision), and its
  // gradient; undefined tensors when absent.
  Tensor weight(const ParamStore& s) const { return defined() ? s.weight_span(first_, count_) : Tensor(); }
  Tensor grad(const ParamStore& s) const { return defined() ? s.grad_span(first_, count_) : Tensor(); }
  // [begin, end) of the flat buffers this reference covers.
  int64_t flat_begin(const ParamStore& s) const { return s.offset(first_); }

 private:
  size_t first_ = 0, count_ = 0;
};

}  // namespace biofm
