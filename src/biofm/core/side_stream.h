// Work beside the compute stream. Backward queues each weight gradient (and bias gradient) of
// the transformer layers on a second CUDA stream, where it runs while the compute stream goes
// on with the chain of input gradients: the weight-gradient GEMMs (K = the tokens, few output
// tiles) leave a part-filled last wave of SMs, and the memory-bound kernels between the GEMMs
// (norm backward, rope, the activation gradients) leave the tensor cores idle; side by side each
// fills the other's gaps (bench/wgrad_overlap_bench.cu). Both streams have the same priority.
//
// The rules that keep it correct (the allocator hands a freed block to the next request, in
// compute-stream order; core/device_memory_cuda.cpp):
//   - a Scope's side-stream work starts after everything queued on the compute stream before the
//     Scope was made;
//   - blocks freed from the Scope's construction on (also by compute-stream work queued before
//     enter(), which runs beside the side work) and the tensors it hold()s (what its work reads
//     and writes) return to the allocator only once the side stream has run that work, or once
//     the compute stream has been made to wait for it (a few scopes later, which bounds the
//     memory held);
//   - nothing may write a tensor a Scope's work reads until join(): callers give such writes a
//     fresh buffer instead (TransformerLayer::backward);
//   - join() before anything reads what the side stream wrote (the gradients): the model's
//     backward joins before each data-parallel hook and at its end.
// Without CUDA (or disabled) a Scope does nothing and the work runs where it always does.
#pragma once
#include <vector>

#include "biofm/core/device_memory.h"
#include "biofm/core/tensor.h"

namespace biofm::side_stream {

// Construction marks the point on the compute stream after which the scope's side work may
// start; enter() sends the ops queued from then on to the side stream, until the scope ends.
// Work queued on the compute stream between the two (an input-gradient GEMM) runs beside it.
class Scope {
 public:
  // enabled false, no CUDA, or already inside an entered scope: a scope that does nothing.
  explicit Scope(bool enabled);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  bool active() const { return active_; }
  void enter();
  // Keeps t's memory alive until the side stream has run this scope's work.
  void hold(const Tensor& t);

 private:
  bool active_ = false, entered_ = false;
  void* done_ = nullptr;  // cudaEvent_t, recorded on the side stream when the scope ends
  std::vector<Tensor> held_;
  DeferredFrees deferred_;
  DeferredFrees* outer_deferred_ = nullptr;  // an enclosing scope's list (restored at the end)
};

// The compute stream waits for everything queued on the side stream so far; memory held for
// that work returns to the allocator. Cheap when nothing is pending.
void join();
// Whether side-stream work was queued since the last join().
bool pending();

// Tests only: every scope holds the compute stream for `compute_us` right after its mark, and
// the side stream for `side_us` when it is entered (host functions that sleep), so that one
// stream's work runs well after the other's and a broken rule shows as a wrong result (a block
// handed out too early: compute delay; a tensor written or read too early: side delay).
void set_delays_for_tests(int compute_us, int side_us);

}  // namespace biofm::side_stream
