// Fully sharded data parallelism (distributed.strategy=fsdp, ZeRO-3).
//
// Each rank keeps one contiguous world-size-th of the flat parameter layout — the shard
// AdamW::shard_of gives it — of everything per parameter: master weights, the bf16 compute copy,
// gradients and AdamW moments. Whole weights exist only while they are used:
//
//   forward   before layer l: wait for its gather; after it: gather layer l+2 into its slot
//             (two slots: the next layer is always in flight while one runs);
//   backward  the last two layers are still resident; before layer l: wait for its gather and
//             zero its gradient slot; once its gradients are final: each owner adds what it
//             has accumulated for its part, the slot is reduced to the owners (ncclReduce into
//             the owners' gradient shards), and layer l-2 is gathered into the freed slot.
//
// A layer's gather is one broadcast per rank owning part of it (an NCCL group): with contiguous
// shards most layers have one owner, and a broadcast moves the same bytes per link as an
// all-gather. What lies outside the layers (embedding, final norm, LM head: under 0.1% of an
// ESM-2 or DNA Llama) is gathered once per step and kept, its gradients reduced at the end.
// The step's collectives depend on nothing but the layer count, so a rank with nothing to
// compute (no labels in a micro batch, fewer evaluation batches) replays them without compute.
//
// bf16_reduce: a unit's gradients are cast to bf16 before the reduction (half the bytes), summed
// in bf16 in place, and each owner widens its part of the sum and adds it into its fp32 gradient
// shard once the reduction has completed (before the slot is reused, or at the end of the step).
//
// Checkpoints and the final export gather a complete master copy into the writing rank's host
// memory (gather_full_copy); the files are the same as for every other strategy, so a run
// resumes under any strategy and any number of ranks.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "biofm/core/tensor.h"
#include "biofm/models/language_model.h"
#include "biofm/train/parallel_strategy.h"

namespace biofm {

class Communicator;

class FsdpSync : public StepSync {
 public:
  // Shards the model's parameter store — unless it was built sharded (ParamShard), which avoids
  // ever holding the whole model — and installs the layer hook. A whole store must be identical
  // on every rank.
  FsdpSync(Communicator& comm, LanguageModel& model, bool bf16_reduce = false);
  ~FsdpSync() override;

  void begin_step() override;
  void skip_micro_batch() override;
  void finish(Tensor& sums) override;

  // The collectives of a forward pass, without compute: for a rank that has run out of
  // evaluation batches while others have not.
  void skip_forward();
  // Collective: a complete master copy on `root`'s host, set as the store's full copy there
  // (for writing; clear it with the store's clear_full_copy). Other ranks take part only.
  void gather_full_copy(int root = 0);

 private:
  using Range = std::pair<int64_t, int64_t>;
  static constexpr int kRest = -1;  // the unit of the parameters outside the layers

  void on_event(LayerEvent e, int layer);
  std::vector<Range> ranges_of(int unit) const;
  // Issues the broadcasts that fill slot `slot` (or the rest's buffer) with unit's weights.
  void gather(int unit, int slot);
  // Makes layer l's slot resident (gathering it first if it is not there) and waits for it.
  void ready(int layer, bool with_grads);
  // Reduces a unit's gradient copy into the owners' gradient shards (adding what they hold).
  // bf16: through `wire` (BF16, at least grads' size); add_reduced completes it.
  void reduce(int unit, const Tensor& grads, Tensor wire);
  // bf16, once the reduction of `unit` through `wire` has completed: the owner's part of the sum,
  // widened in `scratch` (the unit's F32 gradient copy, no longer needed), into its shard.
  void add_reduced(int unit, Tensor& scratch, const Tensor& wire);
  // Waits for slot s's gradient reduction, if one is pending, and completes it.
  void settle_slot(int s);
  // This rank's part of [range) of a flat buffer it holds (empty when it owns none of it).
  Range owned(Range r, int rank) const;
  Tensor local_weights(Range part);  // the compute copy (or masters) of an owned part

  Communicator& comm_;
  LanguageModel& model_;
  ParamStore& store_;
  int layers_ = 0;
  std::vector<Range> layer_ranges_;  // per layer: one range
  std::vector<Range> rest_ranges_;   // the gaps between and around the layers
  int64_t rest_numel_ = 0;

  Tensor slot_w_[2], slot_g_[2];  // sized for the largest layer
  int slot_layer_[2] = {-1, -1};  // which layer each slot holds (-1: none / stale)
  int64_t gather_mark_[2] = {0, 0}, reduce_mark_[2] = {0, 0};
  bool gather_waited_[2] = {true, true};
  bool reduce_pending_[2] = {false, false};
  int slot_layer_grads_[2] = {-1, -1};  // the layer whose gradients each slot's pending reduction sends
  bool bf16_reduce_ = false;
  Tensor wire_[2], rest_wire_;  // bf16_reduce: the gradients as sent (slots, rest)
  Tensor rest_w_, rest_g_;
  bool rest_valid_ = false;
};

}  // namespace biofm
