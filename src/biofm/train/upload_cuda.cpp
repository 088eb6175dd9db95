#include <cuda_runtime.h>

#include <array>
#include <cstring>
#include <mutex>

#include "biofm/core/cuda_context.h"
#include "biofm/train/upload.h"

namespace biofm {

namespace {

// A ring of pinned host buffers. A slot is reused only after the copy that last read it
// has completed (its event), which for a ring of 4 is long past in practice.
class PinnedRing {
 public:
  static constexpr int kSlots = 4;
  ~PinnedRing() {
    for (auto& s : slots_) {
      if (s.host) cudaFreeHost(s.host);
      if (s.done) cudaEventDestroy(s.done);
    }
  }
  // A pinned buffer of at least `bytes`, safe to overwrite now.
  void* acquire(size_t bytes, int& slot) {
    slot = next_;
    next_ = (next_ + 1) % kSlots;
    Slot& s = slots_[size_t(slot)];
    if (s.done) BIOFM_CUDA_CHECK(cudaEventSynchronize(s.done));
    if (s.bytes < bytes) {
      if (s.host) BIOFM_CUDA_CHECK(cudaFreeHost(s.host));
      s.bytes = bytes * 2;
      BIOFM_CUDA_CHECK(cudaMallocHost(&s.host, s.bytes));
    }
    if (!s.done) BIOFM_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    return s.host;
  }
  void release(int slot) { BIOFM_CUDA_CHECK(cudaEventRecord(slots_[size_t(slot)].done, cuda_ctx::stream())); }

 private:
  struct Slot {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };
  std::array<Slot, kSlots> slots_{};
  int next_ = 0;
};

}  // namespace

Batch upload_batch(const Batch& b, Device device) {
  if (device == Device::CPU) return b.to(device);
  static PinnedRing ring;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const Tensor* parts[] = {&b.input_ids, &b.labels, &b.positions, &b.cu_seqlens, &b.seq_lens};
  int64_t total = 0;
  for (const Tensor* t : parts) {
    if (t->dtype() != DType::I32) fail("upload_batch: batch tensors must be I32, got ", t->describe());
    total += t->numel();
  }
  int slot = 0;
  auto* host = static_cast<int32_t*>(ring.acquire(size_t(total) * 4, slot));
  Tensor dev = Tensor::empty({total}, DType::I32, Device::CUDA);
  int64_t off = 0;
  for (const Tensor* t : parts) {
    const Tensor h = t->to(Device::CPU);
    std::memcpy(host + off, h.raw(), h.nbytes());
    off += t->numel();
  }
  BIOFM_CUDA_CHECK(cudaMemcpyAsync(dev.raw(), host, size_t(total) * 4, cudaMemcpyHostToDevice, cuda_ctx::stream()));
  ring.release(slot);
  Batch out = b;
  Tensor* outs[] = {&out.input_ids, &out.labels, &out.positions, &out.cu_seqlens, &out.seq_lens};
  off = 0;
  for (int i = 0; i < 5; ++i) {
    *outs[i] = dev.flat_slice(off, parts[i]->shape());
    off += parts[i]->numel();
  }
  return out;
}

}  // namespace biofm
