// Parsing of a checkpoint's manifest.json and trainer_state.json: strict about shape and
// ranges, every failure a biofm::Error naming the file and key (resume then falls back to
// an older checkpoint). Kept apart from train/checkpoint.cpp so the fuzz targets link it alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace biofm {

struct ManifestFile {
  std::string name;  // a plain file name inside the step directory
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// {"files": {name: {"bytes": N, "crc32": C}, ...}, ...}; `path` names the file in errors.
std::vector<ManifestFile> parse_checkpoint_manifest(const std::string& text, const std::string& path);

struct TrainerStateFields {
  int64_t step = 0;
  uint64_t data_cursor = 0;
};

// {"step": S >= 0, "data_cursor": C >= 0, ...}; expected_step >= 0 must equal S.
TrainerStateFields parse_trainer_state(const std::string& text, const std::string& path, int64_t expected_step = -1);

}  // namespace biofm
