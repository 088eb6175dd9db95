// The data plane of a multi-process run: collectives over tensors, NCCL between GPUs and Gloo
// between CPU processes, behind one small interface. Every call names a contiguous tensor (a
// view into the flat parameter or gradient buffers, usually) and works in place.
//
// Ordering on GPUs: a collective runs on the communicator's own stream, after all work
// enqueued on the compute stream before the call (an event orders them); it returns at once.
// join() makes work enqueued on the compute stream after it wait for every collective issued
// so far. That is all the data-parallel code needs to overlap reductions with backward. On
// CPUs each call completes before it returns and join() does nothing.
#pragma once
#include <memory>
#include <string>

#include "biofm/core/tensor.h"
#include "biofm/dist/launch_env.h"

namespace biofm {

class Coordinator;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;  // "nccl 2.28.9", "gloo (tcp)"

  // t = Σ over ranks of t (F32 or BF16; a BF16 sum rounds to bf16 after each addition).
  virtual void all_reduce_sum(Tensor& t) = 0;
  // On `root`: t = Σ over ranks of t; elsewhere t is left as it was (or used as scratch).
  virtual void reduce_sum(Tensor& t, int root) = 0;
  // t = root's t on every rank.
  virtual void broadcast(Tensor& t, int root) = 0;
  // The same with the source apart from the destination (fsdp's gathers and gradient
  // reductions): broadcast_from: every rank's dst = root's src (src is read on the root only);
  // reduce_sum_to: root's dst = Σ over ranks of src (dst is written on the root only).
  virtual void broadcast_from(const Tensor& src, Tensor& dst, int root) = 0;
  virtual void reduce_sum_to(const Tensor& src, Tensor& dst, int root) = 0;
  // Calls between group_begin and group_end may run concurrently (NCCL groups); on CPUs they
  // run one after another.
  virtual void group_begin() {}
  virtual void group_end() {}
  virtual void join() {}
  // A finer join: mark() names the collectives issued so far; wait_for(m) makes work enqueued
  // on the compute stream after it wait for those only (not for later ones, e.g. a prefetch).
  // Marks are valid until 64 more have been taken.
  virtual int64_t mark() { return 0; }
  virtual void wait_for(int64_t /*mark*/) {}
  // Device memory the collectives run on with fewer resources (NCCL: ncclMemAlloc'd and
  // registered as a symmetric window, so NCCL's symmetric kernels serve it: they hold fewer
  // SMs beside backward's GEMMs). Collective: every rank calls it with the same size, in the
  // same order. nullptr where the backend has none (Gloo). Freed by free_registered (also
  // collective), before the communicator goes.
  virtual void* alloc_registered(size_t /*bytes*/) { return nullptr; }
  virtual void free_registered(void* /*ptr*/) {}
};

// The communicator for `device`, set up through the coordinator's store (NCCL unique id,
// Gloo's addresses). NCCL uses the GPU of the process's local rank (the caller selected it).
// Throws naming what is
// missing when this build has no NCCL (no CUDA) or no Gloo.
// max_ctas (NCCL): the most thread blocks (SMs) a collective may occupy; 0 = NCCL's choice.
std::unique_ptr<Communicator> make_communicator(Coordinator& coord, Device device, const DistEnv& env,
                                                int max_ctas = 0);

// The communicator of a group of consecutive ranks [first_rank, first_rank + size) that this
// rank belongs to (context parallelism's groups); its rank() counts from the group's first.
// Collective over the whole run: every rank calls it, each for its own group, in the same order.
// CPU processes (Gloo) only for now: on GPUs it fails, naming what is missing.
std::unique_ptr<Communicator> make_group_communicator(Coordinator& coord, Device device, const DistEnv& env,
                                                      int first_rank, int size);

// Per backend (comm_nccl_cuda.cpp, comm_gloo.cpp; stubs that fail where not built).
std::unique_ptr<Communicator> make_nccl_communicator(Coordinator& coord, int max_ctas);
std::unique_ptr<Communicator> make_gloo_communicator(Coordinator& coord, bool single_host);
std::unique_ptr<Communicator> make_gloo_group_communicator(Coordinator& coord, bool single_host, int first_rank,
                                                           int size);

}  // namespace biofm
