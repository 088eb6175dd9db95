// remove_stale_temporaries: NAME.tmp.<pid> files of dead processes go; those of live processes,
// other names and directories stay.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "biofm/io/stream_file.h"

namespace fs = std::filesystem;
using namespace biofm;

TEST(StaleTemporaries, OnlyThoseOfDeadProcessesAreRemoved) {
  const std::string d = testing::TempDir() + "/stale_temporaries";
  fs::remove_all(d);
  fs::create_directories(d + "/sub.tmp.1");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // (its pid names a dead process now)
  const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
  for (const std::string& f : {"a.shard.tmp." + dead, "b.json.tmp." + dead, "c.shard.tmp." + alive, std::string("d.shard"),
                               "e.tmp.x" + dead, std::string("f.tmp.")})
    std::ofstream(d + "/" + f) << "x";
  EXPECT_EQ(remove_stale_temporaries(d), 2u);
  EXPECT_FALSE(fs::exists(d + "/a.shard.tmp." + dead));
  EXPECT_FALSE(fs::exists(d + "/b.json.tmp." + dead));
  for (const std::string& f :
       {"c.shard.tmp." + alive, std::string("d.shard"), "e.tmp.x" + dead, std::string("f.tmp."), std::string("sub.tmp.1")})
    EXPECT_TRUE(fs::exists(d + "/" + f)) << f;
  EXPECT_EQ(remove_stale_temporaries(d + "/missing"), 0u);
}
