#include <omp.h>

#include <cstdio>

#include "biofm/cli/commands.h"
#include "biofm/cli/config_search.h"
#include "biofm/cli/flags.h"
#include "biofm/core/device_memory.h"
#include "biofm/data/line_reader.h"
#include "biofm/data/parquet_rows.h"
#include "biofm/dist/launch_env.h"

extern "C" char* openblas_get_config(void);

namespace biofm {

std::string cuda_device_summary();  // device_memory_*.cpp

const CommandSpec kInfoSpec{
    .name = "info",
    .synopsis = "",
    .summary = "build and device information, and where configs are found",
};

int cmd_info(int argc, char** argv) {
  const Flags f = parse_flags(kInfoSpec, argc, argv);
  if (f.help()) {
    print_help(kInfoSpec);
    return 0;
  }
  f.expect_no_positional();
  std::printf("biofm %s\n", BIOFM_VERSION);
#ifdef BIOFM_WITH_CUDA
  std::printf("backends: cpu, cuda\n");
#else
  std::printf("backends: cpu (built without CUDA)\n");
#endif
  std::printf("compiler: %s\n", __VERSION__);
  std::printf("OpenMP threads: %d\n", omp_get_max_threads());
  std::printf("OpenBLAS: %s\n", openblas_get_config());
  std::printf("CUDA: %s\n", cuda_device_summary().c_str());
  std::printf("inputs: gzip, %s, %s\n", zstd_supported() ? "zstd" : "no zstd (built without libzstd)",
              parquet_supported() ? "parquet" : "no parquet (built without Parquet: pip install pyarrow, rebuild)");
  const DistEnv d = detect_dist_env();
  std::printf("process: rank %d of %d, local rank %d of %d, rendezvous %s:%d (%s)\n", d.rank, d.world_size,
              d.local_rank, d.local_world_size, d.master_addr.c_str(), d.master_port, d.source.c_str());
  std::printf("config search path:");
  for (const auto& d : config_search_path("")) std::printf(" %s", d.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace biofm
