// The side stream's scopes and joins (core/side_stream.h): events between the two streams, and
// the memory each scope's work uses, kept until an event says that work has run.
#include "biofm/core/side_stream.h"

#include <deque>
#include <utility>

#include "biofm/core/cuda_context.h"

namespace biofm::side_stream {

namespace {

// One scope's work on the side stream: the event recorded after it, and the memory it uses.
struct Pending {
  cudaEvent_t done = nullptr;
  std::vector<Tensor> held;
  DeferredFrees deferred;
};

struct State {
  std::deque<Pending> pending;       // oldest first
  std::vector<cudaEvent_t> events;   // recycled
  cudaEvent_t start = nullptr;       // compute stream -> side stream, re-recorded per scope
  cudaEvent_t joined = nullptr;      // side stream -> compute stream

  cudaEvent_t new_event() {
    cudaEvent_t e = nullptr;
    if (!events.empty()) {
      e = events.back();
      events.pop_back();
    } else {
      BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    return e;
  }

  void release(Pending& p) {
    for (const auto& [ptr, bytes] : p.deferred) device_free(ptr, bytes);
    p.held.clear();  // (their storage goes back to the allocator here, if these were the last references)
    events.push_back(p.done);
  }

  // The host runs ahead of the GPU (no syncs in a step), so waiting to see scopes finish would
  // keep their memory until the step ends. Instead the compute stream waits for the side
  // stream's work from more than kLag scopes back (long done when the compute stream gets
  // there: the side stream keeps pace) and that memory goes back now: compute-stream work
  // queued from here on runs after it, and side-stream work runs in order.
  static constexpr size_t kLag = 4;  // a transformer layer's linears
  void release_behind() {
    if (pending.size() <= kLag) return;
    const size_t n = pending.size() - kLag;
    BIOFM_CUDA_CHECK(cudaStreamWaitEvent(cuda_ctx::compute_stream(), pending[n - 1].done, 0));
    for (size_t i = 0; i < n; ++i) {
      release(pending.front());
      pending.pop_front();
    }
  }

  // Memory of scopes whose work the side stream has already run goes back now.
  void release_finished() {
    while (!pending.empty()) {
      const cudaError_t q = cudaEventQuery(pending.front().done);
      if (q == cudaErrorNotReady) return;
      BIOFM_CUDA_CHECK(q);
      release(pending.front());
      pending.pop_front();
    }
  }
};

// One host thread drives the model's passes; the state is per thread like the current stream.
State& state() {
  thread_local State s;
  return s;
}

}  // namespace

Scope::Scope(bool enabled)
    : active_(enabled && cuda_available() && cuda_ctx::stream() == cuda_ctx::compute_stream()) {
  if (!active_) return;
  State& s = state();
  s.release_finished();
  s.release_behind();
  if (!s.start) BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&s.start, cudaEventDisableTiming));
  BIOFM_CUDA_CHECK(cudaEventRecord(s.start, cuda_ctx::compute_stream()));
  BIOFM_CUDA_CHECK(cudaStreamWaitEvent(cuda_ctx::side_stream(), s.start, 0));
}

void Scope::enter() {
  if (!active_ || entered_) return;
  entered_ = true;
  cuda_ctx::set_current_stream(cuda_ctx::side_stream());
  device_defer_frees(&deferred_);
}

Scope::~Scope() {
  if (!active_) return;
  if (!entered_) {  // nothing queued on the side stream (its wait on `start` is harmless)
    held_.clear();
    return;
  }
  device_defer_frees(nullptr);
  cuda_ctx::set_current_stream(nullptr);
  State& s = state();
  Pending p;
  p.done = s.new_event();
  // (an error here is sticky: the next CUDA check reports it)
  (void)cudaEventRecord(p.done, cuda_ctx::side_stream());
  p.held = std::move(held_);
  p.deferred = std::move(deferred_);
  s.pending.push_back(std::move(p));
}

void Scope::hold(const Tensor& t) {
  if (active_ && t.defined()) held_.push_back(t);
}

void join() {
  State& s = state();
  if (s.pending.empty()) return;
  if (!s.joined) BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&s.joined, cudaEventDisableTiming));
  BIOFM_CUDA_CHECK(cudaEventRecord(s.joined, cuda_ctx::side_stream()));
  BIOFM_CUDA_CHECK(cudaStreamWaitEvent(cuda_ctx::compute_stream(), s.joined, 0));
  // Compute-stream work queued from here on runs after all of it: the memory may be reused.
  for (Pending& p : s.pending) s.release(p);
  s.pending.clear();
}

bool pending() { return !state().pending.empty(); }

}  // namespace biofm::side_stream
