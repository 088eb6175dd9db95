// The kill-and-resume soak (tools/soak.sh), short: SIGKILL `biofm train` 4 times (twice at a
// random moment, twice inside a checkpoint save), resume each time, and require every step
// logged once with losses, gradient norms and the final model bit-identical to an
// uninterrupted run. The long run (20 kills) is recorded in docs/HARDENING.md.
#include <gtest/gtest.h>

#include "e2e/cli_run.h"

using biofm::testkit::sh;
using biofm::testkit::src;

TEST(E2eSoak, FourKillsAndResumesGiveBitIdenticalLosses) {
  const std::string work = biofm::testkit::fresh_dir("soak");
  const auto r = sh(src("tools/soak.sh") + " --kills 4 --steps 10 --seed 7 --work " + work + " --biofm " +
                    std::string(BIOFM_BINARY));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("soak: 4 kills"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bit-identical"), std::string::npos) << r.output;
}
