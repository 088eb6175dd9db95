#include "biofm/core/error.h"
#include "biofm/dist/comm.h"

namespace biofm {

std::unique_ptr<Communicator> make_nccl_communicator(Coordinator&, int) {
  fail("multi-GPU training needs NCCL, and this biofm was built without CUDA");
}

}  // namespace biofm
