// After the last test, library handles, workspaces and the allocator's cached GPU blocks go back
// to the driver, so that compute-sanitizer's leak check (tools/gpu_sanitize.sh) reports only
// memory a test still holds.
#include <gtest/gtest.h>

#include "biofm/core/device_memory_stats.h"

namespace {

class ReleaseDeviceState : public testing::Environment {
 public:
  void TearDown() override { biofm::device_release_at_exit(); }
};

// (registered before gtest_main's RUN_ALL_TESTS; gtest owns and deletes the environment)
[[maybe_unused]] testing::Environment* const kRegistered =
    testing::AddGlobalTestEnvironment(new ReleaseDeviceState);

}  // namespace
