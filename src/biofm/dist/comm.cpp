#include "biofm/dist/comm.h"

#include "biofm/dist/coordinator.h"

namespace biofm {

std::unique_ptr<Communicator> make_communicator(Coordinator& coord, Device device, const DistEnv& env,
                                                int max_ctas) {
  if (device == Device::CUDA) return make_nccl_communicator(coord, max_ctas);
  return make_gloo_communicator(coord, /*single_host=*/env.local_world_size == env.world_size);
}

}  // namespace biofm
