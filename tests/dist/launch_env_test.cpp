// Reading the launchers' variables: torchrun, Slurm, Open MPI, none.
#include <gtest/gtest.h>

#include <map>

#include "biofm/core/error.h"
#include "biofm/dist/launch_env.h"

using namespace biofm;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST(DistEnv, SingleProcessWithoutLauncherVariables) {
  DistEnv e = detect_dist_env(env_of({}));
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
}

TEST(DistEnv, TorchrunVariables) {
  DistEnv e = detect_dist_env(env_of({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                      {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "node7");
  EXPECT_EQ(e.master_port, 1234);
  EXPECT_EQ(e.source, "torchrun variables");
}

TEST(DistEnv, UnderTorchrunsAgentStoreTheRendezvousTakesTheNextPort) {
  // torchrun (torch >= 2.x) serves its own store on MASTER_PORT and says so.
  const std::map<std::string, std::string> vars{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  DistEnv e = detect_dist_env(env_of(vars));
  EXPECT_EQ(e.master_port, 29501);
  EXPECT_NE(e.source.find("MASTER_PORT + 1"), std::string::npos) << e.source;
  auto no_agent = vars;
  no_agent["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_EQ(detect_dist_env(env_of(no_agent)).master_port, 29500);
  // BIOFM_MASTER_PORT names the port outright, under any launcher.
  auto own = vars;
  own["BIOFM_MASTER_PORT"] = "40000";
  EXPECT_EQ(detect_dist_env(env_of(own)).master_port, 40000);
  EXPECT_EQ(detect_dist_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"BIOFM_MASTER_PORT", "41000"}}))
                .master_port,
            41000);
  own["BIOFM_MASTER_PORT"] = "0";
  EXPECT_THROW(detect_dist_env(env_of(own)), Error);
}

TEST(DistEnv, SlurmVariables) {
  DistEnv e = detect_dist_env(env_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"},
                                      {"SLURM_TASKS_PER_NODE", "8(x2)"}, {"SLURM_NODELIST", "gpu[007-008]"},
                                      {"SLURM_JOB_ID", "123456"}}));
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 16);
  EXPECT_EQ(e.local_world_size, 8);
  EXPECT_EQ(e.master_addr, "gpu007");
  EXPECT_EQ(e.master_port, 20000 + (123456 * 31) % 20000);
  // Without SLURM_TASKS_PER_NODE: tasks / nodes.
  DistEnv f = detect_dist_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}, {"SLURM_NNODES", "4"}}));
  EXPECT_EQ(f.local_world_size, 4);
}

TEST(DistEnv, OpenMpiVariables) {
  DistEnv e = detect_dist_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.source, "Open MPI variables");
}

TEST(DistEnv, SlurmNodeLists) {
  EXPECT_EQ(first_slurm_host("gpu[03-05,9],cpu1"), "gpu03");
  EXPECT_EQ(first_slurm_host("node12,node13"), "node12");
  EXPECT_EQ(first_slurm_host("a[7]"), "a7");
  EXPECT_THROW(first_slurm_host("bad[]"), Error);
}

TEST(DistEnv, BadValuesAreNamed) {
  try {
    detect_dist_env(env_of({{"RANK", "two"}, {"WORLD_SIZE", "4"}}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='two'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(detect_dist_env(env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}})), Error);
  EXPECT_THROW(detect_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}})), Error);
}
