// What the trainer, evaluator and exporter need from a model family (ESM-2, Llama, ...).
#pragma once
#include <functional>
#include <string>
#include <memory>
#include <string>

#include "biofm/core/error.h"
#include "biofm/core/precision.h"
#include "biofm/data/batch.h"
#include "biofm/models/blocks/common.h"
#include "biofm/io/safetensors.h"
#include "biofm/models/params.h"

namespace biofm {

struct LossSums {
  double loss_sum = 0;      // Σ token losses over labelled tokens
  int64_t num_tokens = 0;   // labelled tokens
  int64_t num_correct = 0;  // argmax == label (only when asked for)
};

// Shape numbers for throughput accounting (the seed MFU formula and 6·N).
struct ModelDims {
  int64_t hidden = 0, layers = 0, vocab = 0, ffn = 0, heads = 0, kv_heads = 0;
  int64_t parameters = 0;
  int64_t max_positions = 0;  // max_position_embeddings: the longest sequence the model was made for
};

// Host-side sums over a batch: Σ token_loss and count over labels != -100, and (if asked)
// how many argmax(logits) equal the label. Reads the tensors to the host.
LossSums sum_losses(const Tensor& token_loss, const Tensor& logits, const Tensor& labels, bool count_correct);

// A parameter count as people write it: "8.3K", "651.0M", "6.9B".
std::string parameter_count_text(int64_t n);

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual std::string family() const = 0;  // "esm2", "llama"
  virtual ModelDims dims() const = 0;
  virtual ParamStore& params() = 0;
  virtual const ParamStore& params() const = 0;
  virtual Device device() const = 0;
  // Activation recompute: keep each layer's input only and recompute the layer in backward;
  // layers >= 0 limits it to the first `layers` layers (the rest keep their activations).
  virtual void set_recompute(bool on, int layers = -1) = 0;
  // FP8 GEMMs in the transformer layers (nullopt: the compute precision): every layer in FP8
  // with current scaling; set_layer_quant: each layer's own (ops/fp8/recipe.h; empty: none).
  virtual void set_fp8(std::optional<ops::Fp8Recipe> recipe) = 0;
  virtual void set_layer_quant(std::vector<ops::LayerQuant> layers) = 0;
  virtual const std::vector<ops::LayerQuant>& layer_quant() const = 0;
  // After each optimizer step: DelayedScaling's amax-history roll and scale update (device).
  virtual void quant_step_end() {}
  // Quantization state a checkpoint carries (DelayedScaling histories and scales), by name;
  // the tensors are the model's own (a checkpoint load writes into them).
  virtual std::vector<std::pair<std::string, Tensor>> quant_state() const { return {}; }
  // After a checkpoint load has written quant_state(): whatever the model derives from it.
  virtual void quant_state_loaded() {}
  // While set (non-null): each quantized tensor's statistics go into `c` (ops/fp8/stats.h).
  virtual void set_quant_stats(ops::QuantStatsCollector* c) { (void)c; }
  // Called around each layer's forward and backward (blocks/common.h: LayerEvent), in every
  // forward pass (training, evaluation, inference) and backward pass.
  virtual void set_layer_hook(LayerHook hook) = 0;
  // While set (non-null): an update of the parameters may be owed (blocks/common.h); every pass
  // applies what its layers need before they run.
  void set_weight_update(WeightUpdate* update) { update_ = update; }
  // Applies whatever part of an owed update is still due (on the compute stream).
  void settle_weights() const;
  // Context parallelism (data/context_parallel.h): batches carrying a ContextParallelShard
  // gather their group's rows through `group` in attention. Null: none (the default).
  virtual void set_context_parallel_group(Communicator* group) {
    if (group) fail("the ", family(), " model has no context parallelism");
  }
  // The token whose share of each sequence ESM-2's token dropout rescales by; -1 for models
  // without token dropout. A context-parallel share carries the factors (whole sequences').
  virtual int32_t token_dropout_mask_id() const { return -1; }
  // [begin, end) of layer l's parameters in the flat buffers.
  virtual std::pair<int64_t, int64_t> layer_param_range(int layer) const = 0;

  // Forward + backward: gradients of (Σ token losses) · grad_scale accumulate into the
  // gradient buffer; Σ token losses is added to loss_acc[1] (F32 on the model's device),
  // so a training step needs no host read.
  virtual void forward_backward(const Batch& b, float grad_scale, Tensor& loss_acc) = 0;
  // Loss sums without gradients (count_correct: also argmax accuracy). Reads to the host.
  virtual LossSums evaluate(const Batch& b, bool count_correct) = 0;
  // Final hidden states [T, H] (after the final norm), no gradients.
  virtual Tensor hidden_states(const Batch& b) = 0;
  // Hidden states after the requested layers, no gradients, in the order asked: 0 = the
  // embedding output, l = the output of layer l (1-based), num_layers = the final hidden states
  // (after the final norm, as hidden_states and Hugging Face's last hidden_states entry). Each
  // [T, H] in the activation dtype; the forward stops after the deepest layer asked for.
  virtual std::vector<Tensor> layer_hidden_states(const Batch& b, const std::vector<int>& layers);
  // The batches of the forward passes a caller will run next (inference: embed, score, eval),
  // so that their start-up work (the GPU's attention graphs) runs ahead, overlapping the passes
  // queued before; returns at once. Results do not depend on it.
  virtual void prepare_forward(const std::vector<BatchShape>& batches) { (void)batches; }
  // Logits [T, V] (activation dtype), no gradients.
  virtual Tensor logits(const Batch& b) = 0;
  // Per-token losses [T] (F32, 0 where label is -100), no gradients.
  virtual Tensor token_losses(const Batch& b) = 0;

  // Hugging Face directory: config.json and the tokenizer files (save_hf_metadata), and
  // model.safetensors.
  virtual void save_hf_metadata(const std::string& dir) const = 0;
  void save_hf_dir(const std::string& dir) const;

  // Tensors of the loaded directory that the model does not use but that belong to it (ESM-2's
  // contact head): written to every export unchanged, as a Hugging Face fine-tune that does not
  // train them would keep them.
  void carry_tensors(std::vector<SafetensorsSource> tensors) { carried_ = std::move(tensors); }
  const std::vector<SafetensorsSource>& carried_tensors() const { return carried_; }

 private:
  std::vector<SafetensorsSource> carried_;

 protected:
  WeightUpdate* update_ = nullptr;
};

}  // namespace biofm
