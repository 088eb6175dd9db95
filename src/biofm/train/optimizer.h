// AdamW over a flat parameter store: per-parameter weight-decay flags from the model's
// parameter table, global gradient norm and clipping, all without host synchronisation
// (the clip coefficient stays on the device; the host reads the norm only to log it).
// The moments are F32 whatever the store's dtype; a BF16 store (pure bf16 precision) is
// updated in fp32 and rounded back to bf16 (see ops::adamw_flat).
//
// Sharded (ZeRO), when given a communicator: each rank keeps the moments of, and updates,
// only its shard — a contiguous range of the flat buffer, world-size-th of it — then every
// rank's updated shard is broadcast to the others (the BF16 compute copy when there is one:
// half the bytes; the F32 masters outside a rank's shard are then stale until
// gather_params()). The gradient norm is the norm of the per-shard norms. With a sharded
// parameter store (fsdp) the store holds exactly this shard and nothing is broadcast.
//
// Offloaded (AdamWConfig::offload, for models whose optimizer state does not fit on the GPUs):
// the moments, and in mixed precision the store's fp32 masters themselves (ParamStore::
// move_master), live in host memory (pinned on CUDA). Each step the gradient norm and clip
// coefficient are still computed on the device; the gradient shard and the coefficient go to
// the host (asynchronous copies on the compute stream into pinned buffers, then the step's one
// host synchronisation), the CPU AdamW (the CUDA kernel's arithmetic) updates the shard there, and
// what forward reads goes back: the bf16 compute copy, or the parameters themselves when the
// store has no separate master (fp32, pure bf16). Checkpoints see the same state either way.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "biofm/models/blocks/common.h"
#include "biofm/models/params.h"
#include "biofm/ops/optim/op.h"

namespace biofm {

class Communicator;
class LanguageModel;

struct AdamWConfig {
  float lr = 4e-4f, beta1 = 0.9f, beta2 = 0.98f, eps = 1e-8f, weight_decay = 0.01f;
  float max_grad_norm = 1.0f;  // 0 disables clipping
  bool offload = false;        // optimizer state in host memory, updated by the CPU (above)
};

class AdamW : public WeightUpdate {
 public:
  AdamW(ParamStore& params, const AdamWConfig& cfg, Communicator* shard_over = nullptr);
  // Computes the gradient norm and clip coefficient, then one AdamW update with learning
  // rate `lr`. A non-finite gradient norm leaves parameters and moments untouched.
  // grad_divisor (F32 [1] on the device), when given: the gradient buffer holds that many times
  // the gradient (summed token losses; the divisor is their count), divided out on the device.
  void step(float lr, const Tensor& grad_divisor = Tensor());
  int64_t steps_taken() const { return step_; }
  // The gradient norm of the last step (F32 [1] on the device; reading it syncs).
  const Tensor& grad_norm() const { return norm_; }
  double read_grad_norm() const;

  // ---- The update applied one layer ahead (ops.adamw_ahead) ----
  // From this call on, step() computes the gradient norm and clip coefficient and then owes the
  // update: `model`'s next pass applies each layer's part before the layer runs (a training
  // forward: on the side stream while the layer before runs, so the update's memory traffic
  // hides under the forward's GEMMs) and zeroes that part's gradients once it has read them
  // (TrainStep then leaves its zero_grad out). The parameters outside the layers go first.
  // Every result equals the update applied whole. Not sharded, not offloaded.
  void apply_ahead_in(LanguageModel& model);
  bool update_owed() const { return owed_parts_ > 0; }
  // Applies whatever part is still owed, on the current stream: anything that reads the
  // parameters or the moments outside a pass of the model settles first (the model's
  // settle_weights; gather_params and the next step() do).
  void settle();
  bool due(int layer) const override;
  void apply(int layer) override;

  std::map<std::string, Tensor> state() const;  // moments, for checkpoints (settled: see above)
  void load_state(const std::map<std::string, Tensor>& st, int64_t steps_taken);
  // A moment buffer itself ("exp_avg" or "exp_avg_sq": F32 [numel] on the store's device), for
  // checkpoint loading that streams straight into it; then set_steps_taken. Like load_state, it
  // drops an update still owed (apply_ahead_in): the load replaces it, parameters included.
  Tensor& moment(const std::string& name);
  void set_steps_taken(int64_t steps_taken) { step_ = steps_taken; }

  // [begin, end) of the flat buffer whose moments this optimizer holds: everything, or the
  // shard of this rank. shard_of: the same for any rank of `world` ranks.
  std::pair<int64_t, int64_t> shard() const { return shard_; }
  static std::pair<int64_t, int64_t> shard_of(int64_t numel, int rank, int world);
  bool sharded() const { return comm_ != nullptr; }
  bool offloaded() const { return host_ != nullptr; }
  // Bytes of this rank's state held in host memory instead of the device's (0 unless offloaded).
  int64_t offloaded_bytes() const;
  // Sharded: makes every rank's F32 master parameters complete (each shard broadcast by its
  // owner), before a checkpoint or an export. Not sharded: nothing to do.
  void gather_params();

 private:
  void broadcast_shards(Tensor& flat);
  // Offloaded: copies to the host, the CPU update and the copy back (p, c: the shard of the
  // masters and of the compute copy; grad: the shard's gradients on the device).
  void update_on_host(Tensor& p, Tensor& c, const Tensor& grad, const ops::AdamWHyper& h);
  void gather_host_masters();

  // Host buffers of an offloaded optimizer. grad: the shard's gradients; param: the shard's
  // parameters when the store has no separate master (they are what forward reads; undefined
  // otherwise); compute: the shard's updated compute copy on its way back (undefined without one);
  // clip: the clip coefficient [1]; decay_ranges: decay_ranges_ on the host.
  struct HostState {
    Tensor grad, param, compute, clip, decay_ranges;
    bool moved_master = false;
  };

  ParamStore& params_;
  AdamWConfig cfg_;
  Communicator* comm_ = nullptr;
  std::pair<int64_t, int64_t> shard_;
  Tensor m_, v_, decay_ranges_, norm_, clip_coef_;
  Tensor shard_norms_, shard_clip_;  // sharded: per-rank norms [world], scratch coefficient
  int64_t step_ = 0;
  std::unique_ptr<HostState> host_;

  // apply_ahead_in: the flat buffers in parts, each a layer's range or a range outside the
  // layers (layer -1), with its own decay ranges (relative to the part's start).
  struct Part {
    int layer = -1;
    std::pair<int64_t, int64_t> range;
    Tensor decay_ranges;
    bool owed = false;
  };
  std::vector<Part> parts_;
  int owed_parts_ = 0;
  ops::AdamWHyper owed_hyper_;
  void apply_part(Part& part);
  void drop_owed();
};

}  // namespace biofm
