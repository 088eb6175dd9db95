// Where this process sits in a multi-process run: rank, world size, local rank and the
// rendezvous address, read from the variables the launchers set — torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Slurm's srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODELIST, ...) and Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK, ...). `biofm launch` sets the torchrun ones.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace biofm {

struct DistEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "single process";  // which launcher's variables were read

  bool distributed() const { return world_size > 1; }
};

// Reads a variable (nullopt when unset); tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// torchrun's variables first, then Slurm's, then Open MPI's; none: a single process. Under
// torchrun, whose agent holds MASTER_PORT, the rendezvous is on MASTER_PORT + 1;
// BIOFM_MASTER_PORT, when set, names the rendezvous port for any launcher. Values
// that do not parse or contradict each other (rank >= world size, ...) throw, naming them.
DistEnv detect_dist_env(const EnvLookup& env = process_env());

// The same for a command that splits its work over ranks only when really started as one of
// several (embed): an sbatch script with --ntasks N carries SLURM_PROCID / SLURM_NTASKS without
// being one of N tasks, so Slurm's variables count only inside a job step (srun sets
// SLURM_STEP_NUM_TASKS); elsewhere one process.
DistEnv detect_launched_ranks(const EnvLookup& env = process_env());

// The first host of a Slurm node list: "gpu[03-05,9],cpu1" → "gpu03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace biofm
