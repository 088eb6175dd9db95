// Running the biofm binary from a test: exit code and combined output, plus paths.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace biofm::testkit {

struct RunResult {
  int code;
  std::string output;
};

// A shell command, stdout and stderr together.
inline RunResult sh(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `biofm ARGS`.
inline RunResult run_biofm(const std::string& args) { return sh(std::string(BIOFM_BINARY) + " " + args); }

// `biofm ARGS` as one process on one thread: these tiny models gain nothing from more, and a
// loaded machine makes OpenMP's waiting threads slow. No launcher variables from the caller (a CI
// job under srun or torchrun): the run is one process unless the test says otherwise.
inline const std::string kOneProcess =
    "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS "
    "-u SLURM_STEP_NUM_TASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE OMP_NUM_THREADS=1 ";
inline RunResult run_biofm_one_process(const std::string& args) {
  return sh(kOneProcess + std::string(BIOFM_BINARY) + " " + args);
}

// A path in the source tree.
inline std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

// An empty directory under the test temp dir.
inline std::string fresh_dir(const std::string& name) {
  const std::string d =
      (std::filesystem::path(testing::TempDir()) / ("biofm_" + name)).lexically_normal().string();
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Every record of a metrics.jsonl.
inline std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The training losses of a run directory, one per logged step.
inline std::vector<double> losses(const std::string& run_dir) {
  std::vector<double> out;
  for (const auto& r : read_metrics(run_dir + "/metrics.jsonl"))
    if (r.contains("loss")) out.push_back(r["loss"].get<double>());
  return out;
}

}  // namespace biofm::testkit
