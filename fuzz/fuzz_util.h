// Shared helpers of the fuzz targets. A target passes when the input is accepted or rejected
// with a biofm::Error; any other exception escapes to libFuzzer and counts as a crash, as do
// ASan/UBSan reports, timeouts and out-of-memory.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace biofm::fuzz {

// Writes the bytes to a per-process file in /dev/shm (or /tmp) with the given suffix, for the
// readers that take a path; the same file is reused by every run of the process.
inline std::string write_temp(const uint8_t* data, size_t size, const std::string& suffix) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/biofm_fuzz_" + std::to_string(getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace biofm::fuzz
