#include "biofm/dist/launch_env.h"

#include <algorithm>
#include <cstdlib>

#include "biofm/core/error.h"

namespace biofm {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

namespace {

int64_t int_var(const EnvLookup& env, const std::string& name, int64_t fallback, int64_t lo,
                int64_t hi = int64_t(1) << 24) {
  const auto v = env(name);
  if (!v) return fallback;
  size_t pos = 0;
  long long x = 0;
  try {
    x = std::stoll(*v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != v->size() || x < lo || x > hi)
    fail("environment variable ", name, "='", *v, "' is not an integer in [", lo, ", ", hi, "]");
  return x;
}

void check(const DistEnv& e) {
  if (e.rank >= e.world_size)
    fail(e.source, ": rank ", e.rank, " is not below the world size ", e.world_size);
  if (e.local_rank >= e.local_world_size)
    fail(e.source, ": local rank ", e.local_rank, " is not below the local world size ", e.local_world_size);
  if (e.master_port < 1 || e.master_port > 65535) fail(e.source, ": master port ", e.master_port, " out of range");
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry, up to a comma outside brackets.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  // prefix[03-05,9] → prefix + the first number of the range list, keeping its zero padding.
  const std::string prefix = first.substr(0, open);
  std::string range = first.substr(open + 1);
  const size_t end = range.find_first_of(",-]");
  if (end == 0 || end == std::string::npos) fail("cannot read Slurm node list '", nodelist, "'");
  return prefix + range.substr(0, end);
}

DistEnv detect_dist_env(const EnvLookup& env) {
  DistEnv e;
  if (env("RANK") || env("WORLD_SIZE")) {
    e.source = "torchrun variables";
    e.rank = (int)int_var(env, "RANK", 0, 0);
    e.world_size = (int)int_var(env, "WORLD_SIZE", 1, 1);
    e.local_rank = (int)int_var(env, "LOCAL_RANK", e.rank, 0);
    e.local_world_size = (int)int_var(env, "LOCAL_WORLD_SIZE", e.world_size, 1);
    if (auto a = env("MASTER_ADDR")) e.master_addr = *a;
    e.master_port = (int)int_var(env, "MASTER_PORT", e.master_port, 1);
    // torchrun's agent serves its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True,
    // the default since torch 2.x): rank 0 could not listen there, so biofm's rendezvous takes
    // the next port.
    if (const auto agent = env("TORCHELASTIC_USE_AGENT_STORE"); agent && (*agent == "True" || *agent == "1")) {
      e.source = "torchrun variables (the agent holds MASTER_PORT; rendezvous on MASTER_PORT + 1)";
      e.master_port += 1;
    }
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    e.source = "Slurm variables";
    e.rank = (int)int_var(env, "SLURM_PROCID", 0, 0);
    e.world_size = (int)int_var(env, "SLURM_NTASKS", 1, 1);
    e.local_rank = (int)int_var(env, "SLURM_LOCALID", 0, 0);
    // Tasks on this node: SLURM_TASKS_PER_NODE ("4" or "4(x2),3": the first group's count; srun
    // sets it always), else SLURM_NTASKS / SLURM_NNODES.
    if (auto t = env("SLURM_TASKS_PER_NODE")) {
      const std::string first = t->substr(0, t->find_first_of("(,"));
      e.local_world_size = (int)int_var([&](const std::string&) { return std::optional<std::string>(first); },
                                   "SLURM_TASKS_PER_NODE", 1, 1);
    } else {
      e.local_world_size = std::max(1, e.world_size / (int)int_var(env, "SLURM_NNODES", 1, 1));
    }
    if (auto a = env("MASTER_ADDR"))
      e.master_addr = *a;
    else if (auto nodes = env("SLURM_NODELIST"))
      e.master_addr = first_slurm_host(*nodes);
    // A port derived from the job and step ids keeps concurrent jobs (and steps) on a node apart.
    if (env("SLURM_JOB_ID"))
      e.master_port = int(20000 + (int_var(env, "SLURM_JOB_ID", 0, 0, int64_t(1) << 40) * 31 +
                                   int_var(env, "SLURM_STEP_ID", 0, 0, int64_t(1) << 40)) % 20000);
    e.master_port = (int)int_var(env, "MASTER_PORT", e.master_port, 1);
  } else if (env("OMPI_COMM_WORLD_RANK")) {
    e.source = "Open MPI variables";
    e.rank = (int)int_var(env, "OMPI_COMM_WORLD_RANK", 0, 0);
    e.world_size = (int)int_var(env, "OMPI_COMM_WORLD_SIZE", 1, 1);
    e.local_rank = (int)int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 0);
    e.local_world_size = (int)int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1);
    if (auto a = env("MASTER_ADDR")) e.master_addr = *a;
    e.master_port = (int)int_var(env, "MASTER_PORT", e.master_port, 1);
  }
  // BIOFM_MASTER_PORT: the rendezvous port, whatever the launcher's variables say.
  e.master_port = (int)int_var(env, "BIOFM_MASTER_PORT", e.master_port, 1);
  check(e);
  return e;
}

DistEnv detect_launched_ranks(const EnvLookup& env) {
  DistEnv d = detect_dist_env(env);
  if (d.distributed() && d.source == "Slurm variables" && !env("SLURM_STEP_NUM_TASKS")) return DistEnv{};
  return d;
}

}  // namespace biofm
