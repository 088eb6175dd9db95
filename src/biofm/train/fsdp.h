// Sharded data parallelism: distributed.strategy=fsdp (ZeRO-3) and zero2 (ZeRO-2).
//
// Each rank keeps one contiguous world-size-th of the flat parameter layout — the shard
// AdamW::shard_of gives it — of the gradients and AdamW moments and, under fsdp, of the master
// weights and the bf16 compute copy too (zero2 keeps every weight whole on every rank). A layer's
// gradients live in one of two slots only while backward computes and reduces them:
//
//   forward   (fsdp) before layer l: wait for its gather; after it: gather layer l+2 into its slot
//             (two slots: the next layer is always in flight while one runs);
//   backward  before layer l: (fsdp: wait for its gather) zero its gradient slot; once its
//             gradients are final: each owner adds what it has accumulated for its part, the slot
//             is reduced to the owners (ncclReduce into the owners' gradient shards), and (fsdp)
//             layer l-2 is gathered into the freed slot.
//
// So gradients are reduced on every micro batch, not once per step as ddp/zero1 do: the price of
// never holding a whole gradient (ZeRO-2 and FSDP pay it alike). With one micro batch per step
// zero2 moves half the bytes of an all-reduce; with many, more than zero1 does.
//
// A layer's gather is one broadcast per rank owning part of it (an NCCL group): with contiguous
// shards most layers have one owner, and a broadcast moves the same bytes per link as an
// all-gather. What lies outside the layers (embedding, final norm, LM head: under 0.1% of an
// ESM-2 or DNA Llama) is gathered once per step and kept (fsdp), its gradients accumulated in a
// buffer of its own and reduced at the end of the step.
// The step's collectives depend on nothing but the layer count, so a rank with nothing to
// compute (no labels in a micro batch, fewer evaluation batches) replays them without compute.
//
// bf16_reduce: a unit's gradients are cast to bf16 before the reduction (half the bytes), summed
// in bf16 in place, and each owner widens its part of the sum and adds it into its fp32 gradient
// shard once the reduction has completed (before the slot is reused, or at the end of the step).
//
// Checkpoints and the final export of fsdp runs gather a complete master copy into the writing
// rank's host memory (gather_full_copy) or write each rank's part (train/checkpoint.h); zero2's
// weights are whole on every rank and are written as zero1's.
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
  // strategy Fsdp: shards the model's parameter store — unless it was built sharded
  // (ParamShard), which avoids ever holding the whole model; Zero2: shards its gradients only.
  // Installs the layer hook. A whole store must be identical on every rank.
  FsdpSync(Communicator& comm, LanguageModel& model, ParallelStrategy strategy, bool bf16_reduce = false);
  ~FsdpSync() override;

  void begin_step() override;
  void skip_micro_batch() override;
  void finish(Tensor& sums) override;

  // The collectives of a forward pass, without compute: for a rank that has run out of
  // evaluation batches while others have not (none under zero2).
  void skip_forward();
  // Collective (fsdp only): a complete master copy on `root`'s host, set as the store's full copy there
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
  bool shard_weights_ = true;  // fsdp; false: zero2 (whole weights, sharded gradients)
  Tensor wire_[2], rest_wire_;  // bf16_reduce: the gradients as sent (slots, rest)
  Tensor rest_w_, rest_g_;
  bool rest_valid_ = false;
};

}  // namespace biofm
