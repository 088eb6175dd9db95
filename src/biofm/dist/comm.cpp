#include "biofm/dist/comm.h"

#include "biofm/dist/coordinator.h"

namespace biofm {

std::unique_ptr<Communicator> make_communicator(Coordinator& coord, Device device, const DistEnv& env,
                                                int max_ctas) {
  if (device == Device::CUDA) return make_nccl_communicator(coord, max_ctas);
  return make_gloo_communicator(coord, /*single_host=*/env.local_world_size == env.world_size);
}

std::unique_ptr<Communicator> make_group_communicator(Coordinator& coord, Device device, const DistEnv& env,
                                                      int first_rank, int size) {
  if (device == Device::CUDA)
    fail("context parallelism (cp_size > 1) runs on CPU processes only in this version: its groups' "
         "NCCL communicators are not built yet; use device=cpu or cp_size=1");
  return make_gloo_group_communicator(coord, /*single_host=*/env.local_world_size == env.world_size, first_rank,
                                      size);
}

}  // namespace biofm
