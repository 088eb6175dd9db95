// The side stream's scopes and joins (core/side_stream.h): events between the two streams, and
// the memory each scope's work uses, kept until it is safe to hand out again.
#include "biofm/core/side_stream.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <thread>
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

void free_all(DeferredFrees& d) {
  for (const auto& [ptr, bytes] : d) device_free(ptr, bytes);
  d.clear();
}

struct State {
  std::deque<Pending> pending;      // oldest first
  std::vector<cudaEvent_t> events;  // recycled
  cudaEvent_t start = nullptr;      // compute stream -> side stream, re-recorded per scope
  cudaEvent_t joined = nullptr;     // side stream -> compute stream

  cudaEvent_t new_event() {
    if (!events.empty()) {
      cudaEvent_t e = events.back();
      events.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  void release(Pending& p) {
    free_all(p.deferred);
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

std::atomic<int> g_compute_delay_us{0}, g_side_delay_us{0};

void CUDART_CB sleep_host(void* us) {
  std::this_thread::sleep_for(std::chrono::microseconds(reinterpret_cast<intptr_t>(us)));
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
  if (const int us = g_compute_delay_us.load(); us > 0)
    BIOFM_CUDA_CHECK(cudaLaunchHostFunc(cuda_ctx::compute_stream(), &sleep_host, reinterpret_cast<void*>(intptr_t(us))));
  // From the mark on, a freed block may still be in use by compute-stream work that the side
  // work runs beside (the input gradient's temporaries): none is handed out before this scope's
  // memory is.
  outer_deferred_ = device_defer_frees(&deferred_);
}

void Scope::enter() {
  if (!active_ || entered_) return;
  State& s = state();
  done_ = s.new_event();  // (made here, not in the destructor, which must not throw)
  cudaStream_t side = cuda_ctx::side_stream();
  BIOFM_CUDA_CHECK(cudaStreamWaitEvent(side, s.start, 0));
  if (const int us = g_side_delay_us.load(); us > 0)
    BIOFM_CUDA_CHECK(cudaLaunchHostFunc(side, &sleep_host, reinterpret_cast<void*>(intptr_t(us))));
  entered_ = true;
  cuda_ctx::set_current_stream(side);
}

Scope::~Scope() {
  if (!active_) return;
  device_defer_frees(outer_deferred_);
  if (!entered_) {  // nothing queued on the side stream: compute-stream order covers these frees
    free_all(deferred_);
    held_.clear();
    // (enter() took an event and then failed: back to the pool, unused)
    if (done_) state().events.push_back(static_cast<cudaEvent_t>(done_));
    return;
  }
  cuda_ctx::set_current_stream(nullptr);
  State& s = state();
  Pending p;
  p.done = static_cast<cudaEvent_t>(done_);
  p.held = std::move(held_);
  p.deferred = std::move(deferred_);
  if (cudaEventRecord(p.done, cuda_ctx::side_stream()) != cudaSuccess) {
    // No event to wait for: this memory can never be shown safe, so it is never handed out.
    static auto* kept = new std::vector<Pending>;
    kept->push_back(std::move(p));
    return;
  }
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

void set_delays_for_tests(int compute_us, int side_us) {
  g_compute_delay_us.store(compute_us);
  g_side_delay_us.store(side_us);
}

}  // namespace biofm::side_stream
