// NCCL between the GPUs of a run (one process per GPU). Collectives run on a high-priority
// stream of their own, ordered after the compute stream's work by an event, so that gradient
// reductions overlap the rest of backward; join() orders the compute stream after them.
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "biofm/core/cuda_context.h"
#include "biofm/core/range_timer.h"
#include "biofm/dist/comm.h"
#include "biofm/dist/coordinator.h"

#define BIOFM_NCCL_CHECK(expr)                                                                        \
  do {                                                                                                \
    ncclResult_t r_ = (expr);                                                                         \
    if (r_ != ncclSuccess)                                                                            \
      ::biofm::fail("NCCL error in " #expr ": ", ncclGetErrorString(r_), " (", ncclGetLastError(nullptr), ")"); \
  } while (0)

namespace biofm {

namespace {

ncclDataType_t nccl_type(const Tensor& t) {
  if (t.device() != Device::CUDA) fail("nccl: needs a CUDA tensor, got ", t.describe());
  switch (t.dtype()) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    default: fail("nccl: no reduction for ", t.describe());
  }
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Coordinator& coord, int max_ctas) : rank_(coord.rank()), world_(coord.world_size()) {
    ncclUniqueId id{};
    if (rank_ == 0) {
      BIOFM_NCCL_CHECK(ncclGetUniqueId(&id));
      coord.set("nccl_unique_id", std::string(reinterpret_cast<const char*>(&id), sizeof id));
    } else {
      const std::string v = coord.get("nccl_unique_id");
      if (v.size() != sizeof id) fail("nccl: the unique id from rank 0 has ", v.size(), " bytes");
      std::memcpy(&id, v.data(), sizeof id);
    }
    // (distributed.comm_sms: a cap on the SMs a collective holds beside backward; capping
    // measured slower on 2 H200, so NCCL chooses unless told)
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (max_ctas > 0) config.maxCTAs = max_ctas;
    BIOFM_NCCL_CHECK(ncclCommInitRankConfig(&comm_, world_, id, rank_, &config));
    int least = 0, greatest = 0;
    BIOFM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    BIOFM_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
    int v = 0;
    ncclGetVersion(&v);
    trace_every_ = std::getenv("BIOFM_NCCL_TRACE") ? std::atoi(std::getenv("BIOFM_NCCL_TRACE")) : 0;
    version_ = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  }
  ~NcclCommunicator() override {
    // (a clean end: every collective has completed; a failed run ends the process instead)
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : marks_)
      if (e) cudaEventDestroy(e);
    for (auto& [ptr, win] : windows_) {  // (not freed by their user: a failed run)
      ncclCommWindowDeregister(comm_, win);
      ncclMemFree(ptr);
    }
    ncclCommDestroy(comm_);
    cudaEventDestroy(compute_done_);
    cudaEventDestroy(comm_done_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string name() const override { return "nccl " + version_; }

  void* alloc_registered(size_t bytes) override {
    // Where NCCL cannot (no cuMem support, an old driver), the run goes on with plain buffers.
    // (A system refuses this on every rank alike, so the ranks stay in step.)
    void* ptr = nullptr;
    ncclResult_t r = ncclMemAlloc(&ptr, bytes);
    ncclWindow_t win = nullptr;
    if (r == ncclSuccess) {
      BIOFM_CUDA_CHECK(cudaMemset(ptr, 0, bytes));
      r = ncclCommWindowRegister(comm_, ptr, bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
      if (r != ncclSuccess) ncclMemFree(ptr);
    }
    if (r != ncclSuccess) {
      if (rank_ == 0)
        std::fprintf(stderr, "note: NCCL symmetric memory unavailable (%s); reducing in plain buffers\n",
                     ncclGetErrorString(r));
      return nullptr;
    }
    windows_.emplace_back(ptr, win);
    return ptr;
  }
  void free_registered(void* ptr) override {
    for (size_t i = 0; i < windows_.size(); ++i) {
      if (windows_[i].first != ptr) continue;
      BIOFM_CUDA_CHECK(cudaStreamSynchronize(stream_));
      BIOFM_CUDA_CHECK(cudaStreamSynchronize(cuda_ctx::stream()));
      BIOFM_NCCL_CHECK(ncclCommWindowDeregister(comm_, windows_[i].second));
      BIOFM_NCCL_CHECK(ncclMemFree(ptr));
      windows_.erase(windows_.begin() + std::ptrdiff_t(i));
      return;
    }
    fail("nccl: free_registered of a pointer it did not allocate");
  }

  void all_reduce_sum(Tensor& t) override {
    const ncclDataType_t ty = nccl_type(t);
    after_compute();
    Span* sp = trace_begin(t.nbytes());
    Timed timed(this, "nccl all_reduce");
    BIOFM_NCCL_CHECK(ncclAllReduce(t.raw(), t.raw(), size_t(t.numel()), ty, ncclSum, comm_, stream_));
    trace_end(sp);
  }
  void reduce_sum(Tensor& t, int root) override {
    const ncclDataType_t ty = nccl_type(t);
    after_compute();
    Timed timed(this, "nccl reduce");
    BIOFM_NCCL_CHECK(ncclReduce(t.raw(), t.raw(), size_t(t.numel()), ty, ncclSum, root, comm_, stream_));
  }
  void broadcast(Tensor& t, int root) override {
    if (t.device() != Device::CUDA) fail("nccl: needs a CUDA tensor, got ", t.describe());
    after_compute();
    Timed timed(this, "nccl broadcast");
    BIOFM_NCCL_CHECK(ncclBroadcast(t.raw(), t.raw(), t.nbytes(), ncclUint8, root, comm_, stream_));
  }
  void broadcast_from(const Tensor& src, Tensor& dst, int root) override {
    if (dst.device() != Device::CUDA) fail("nccl: needs a CUDA tensor, got ", dst.describe());
    if (rank_ == root && src.nbytes() != dst.nbytes()) fail("nccl broadcast: ", src.describe(), " into ", dst.describe());
    after_compute();
    const void* send = rank_ == root ? src.raw() : dst.raw();
    Timed timed(this, "nccl broadcast");
    BIOFM_NCCL_CHECK(ncclBroadcast(send, dst.raw(), dst.nbytes(), ncclUint8, root, comm_, stream_));
  }
  void reduce_sum_to(const Tensor& src, Tensor& dst, int root) override {
    const ncclDataType_t ty = nccl_type(src);
    if (rank_ == root && (dst.dtype() != src.dtype() || dst.numel() != src.numel()))
      fail("nccl reduce: ", src.describe(), " into ", dst.describe());
    after_compute();
    Timed timed(this, "nccl reduce");
    BIOFM_NCCL_CHECK(ncclReduce(src.raw(), rank_ == root ? dst.raw() : nullptr, size_t(src.numel()), ty, ncclSum, root,
                                comm_, stream_));
  }
  int64_t mark() override {
    cudaEvent_t& e = marks_[size_t(next_mark_ % kMarks)];
    if (!e) BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    BIOFM_CUDA_CHECK(cudaEventRecord(e, stream_));
    return next_mark_++;
  }
  void wait_for(int64_t m) override {
    if (m < next_mark_ - kMarks || m >= next_mark_) fail("nccl: mark ", m, " is no longer valid");
    BIOFM_CUDA_CHECK(cudaStreamWaitEvent(cuda_ctx::stream(), marks_[size_t(m % kMarks)], 0));
  }
  void group_begin() override {
    after_compute();  // (event calls are not allowed to split a group's work)
    group_span_ = range_timer::begin("nccl group", stream_);  // (profiler.range_times: the whole group)
    in_group_ = true;
    BIOFM_NCCL_CHECK(ncclGroupStart());
  }
  void group_end() override {
    BIOFM_NCCL_CHECK(ncclGroupEnd());
    in_group_ = false;
    range_timer::end(group_span_, stream_);
    group_span_ = -1;
  }
  void join() override {
    BIOFM_CUDA_CHECK(cudaEventRecord(comm_done_, stream_));
    BIOFM_CUDA_CHECK(cudaStreamWaitEvent(cuda_ctx::stream(), comm_done_, 0));
    if (trace_every_ > 0) trace_report();
  }

 private:
  // profiler.range_times: a collective's time on the communicator's stream (inside a group only
  // the whole group is timed: events may not split a group's work).
  struct Timed {
    NcclCommunicator* c;
    int id;
    Timed(NcclCommunicator* comm, const char* name)
        : c(comm), id(comm->in_group_ ? -1 : range_timer::begin(name, comm->stream_)) {}
    ~Timed() { range_timer::end(id, c->stream_); }
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;
  };
  int group_span_ = -1;

  // The collective reads what the compute stream wrote before this call.
  void after_compute() {
    if (in_group_) return;
    BIOFM_CUDA_CHECK(cudaEventRecord(compute_done_, cuda_ctx::stream()));
    BIOFM_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_done_, 0));
  }

  // BIOFM_NCCL_TRACE=N (diagnostics): every N-th join, rank 0 prints when each all-reduce's input
  // was ready on the compute stream, when it started and ended on the comm stream, and when the
  // compute stream reached the join (ms from the first all-reduce's readiness). Syncs the device.
  struct Span {
    cudaEvent_t ready, start, end;
    size_t bytes;
  };
  Span* trace_begin(size_t bytes) {
    if (trace_every_ <= 0 || rank_ != 0) return nullptr;
    Span sp{};
    sp.bytes = bytes;
    for (cudaEvent_t* e : {&sp.ready, &sp.start, &sp.end}) BIOFM_CUDA_CHECK(cudaEventCreate(e));
    BIOFM_CUDA_CHECK(cudaEventRecord(sp.ready, cuda_ctx::stream()));
    BIOFM_CUDA_CHECK(cudaEventRecord(sp.start, stream_));
    spans_.push_back(sp);
    return &spans_.back();
  }
  void trace_end(Span* sp) {
    if (sp) BIOFM_CUDA_CHECK(cudaEventRecord(sp->end, stream_));
  }
  void trace_report() {
    if (rank_ != 0 || spans_.empty()) return;
    if (++joins_ % trace_every_ != 0) {
      clear_spans();
      return;
    }
    cudaEvent_t joined;
    BIOFM_CUDA_CHECK(cudaEventCreate(&joined));
    BIOFM_CUDA_CHECK(cudaEventRecord(joined, cuda_ctx::stream()));
    BIOFM_CUDA_CHECK(cudaEventSynchronize(joined));
    auto ms = [&](cudaEvent_t e) {
      float t = 0;
      BIOFM_CUDA_CHECK(cudaEventElapsedTime(&t, spans_.front().ready, e));
      return t;
    };
    std::fprintf(stderr, "nccl trace (join %ld): %zu all-reduces; compute reached join at %.2f ms\n", long(joins_),
                 spans_.size(), ms(joined));
    for (const Span& sp : spans_)
      std::fprintf(stderr, "  %8.1f MB ready %8.2f start %8.2f end %8.2f (%.2f ms)\n", double(sp.bytes) / 1e6,
                   ms(sp.ready), ms(sp.start), ms(sp.end), ms(sp.end) - ms(sp.start));
    cudaEventDestroy(joined);
    clear_spans();
  }
  void clear_spans() {
    for (Span& sp : spans_)
      for (cudaEvent_t e : {sp.ready, sp.start, sp.end}) cudaEventDestroy(e);
    spans_.clear();
  }

  int rank_, world_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, comm_done_ = nullptr;
  bool in_group_ = false;
  std::string version_;
  static constexpr int64_t kMarks = 64;
  cudaEvent_t marks_[kMarks] = {};
  std::vector<std::pair<void*, ncclWindow_t>> windows_;  // alloc_registered's buffers
  int64_t next_mark_ = 0;
  int trace_every_ = 0;
  int64_t joins_ = 0;
  std::deque<Span> spans_;  // (a deque: trace_begin hands out pointers into it)
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Coordinator& coord, int max_ctas) {
  return std::make_unique<NcclCommunicator>(coord, max_ctas);
}

}  // namespace biofm
