// Gradient synchronisation of data-parallel training: every rank runs the same model on its
// own micro batches; before the optimizer, the gradients (sums over token losses), the loss
// sum and the label-token count are summed over ranks, so the step equals one process running
// all ranks' micro batches (the optimizer divides by the global count).
//
// Reductions overlap backward: on the step's last micro batch, each layer's gradients are
// final as soon as backward leaves the layer (the model's grads-ready hook); they are reduced in
// buckets of consecutive layers (at least bucket_bytes) on the communicator's stream while
// backward goes on. What lies outside the layers (embeddings, final norm, head) and the two
// scalars follow at the end.
//   ddp:   all-reduce; every rank's optimizer updates every parameter.
//   zero1: all-reduce; the optimizer is sharded (each rank updates and keeps the moments of
//          its shard, then broadcasts it).
// (zero2 and fsdp shard the gradients themselves, so they reduce every micro batch's: FsdpSync,
// train/fsdp.h.)
// bf16_reduce: gradients travel as bf16 (half the bytes), summed in bf16 (NCCL; Gloo on CPUs),
// widened back. (FsdpSync does the same.)
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "biofm/core/tensor.h"
#include "biofm/models/language_model.h"
#include "biofm/train/parallel_strategy.h"

namespace biofm {

class Communicator;

bool optimizer_sharded(ParallelStrategy s);

struct DataParallelOptions {
  ParallelStrategy strategy = ParallelStrategy::Ddp;
  int64_t bucket_bytes = int64_t(25) << 20;
  bool bf16_reduce = false;
  // NCCL: the reduced buffer (the gradients, or their bf16 copy) in ncclMemAlloc'd memory
  // registered as a symmetric window (Communicator::alloc_registered).
  bool nccl_symmetric = false;
};

class GradientSync : public StepSync {
 public:
  // o.strategy: ddp or zero1.
  GradientSync(Communicator& comm, LanguageModel& model, const DataParallelOptions& o);
  ~GradientSync() override;
  // Called before the step's last micro batch: from then on, layers' gradients are reduced as
  // backward finishes them.
  void arm() override;
  // After the last micro batch: reduces whatever is left, then sums `sums` (F32 [2]: the loss
  // sum and the label count) over ranks; work enqueued after this sees the summed values.
  void finish(Tensor& sums) override;

 private:
  // A bucket: consecutive layers (in backward order) or a range outside the layers.
  struct Bucket {
    std::pair<int64_t, int64_t> range;
    int last_layer = -1;  // the layer whose gradients complete it (-1: only at finish)
  };
  void on_layer_ready(int layer);
  void launch(std::pair<int64_t, int64_t> range);

  Communicator& comm_;
  LanguageModel& model_;
  DataParallelOptions o_;
  // The plan, the same on every rank: collectives are matched by order, so every rank issues the
  // buckets in this order (a rank whose last micro batch had no labels, and so no backward,
  // issues all of them at finish).
  std::vector<Bucket> plan_;
  size_t next_ = 0;  // the first bucket not yet issued this step
  bool armed_ = false;
  Tensor bf16_grads_;   // bf16_reduce: the gradients as bf16, same layout
  // nccl_symmetric: the communicator's registered buffer (the gradients or bf16_grads_ live
  // there), and the store's own gradient buffer, given back at the end.
  void* registered_ = nullptr;
  Tensor store_grads_;
};

}  // namespace biofm
