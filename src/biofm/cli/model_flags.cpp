#include "biofm/cli/model_flags.h"

#include <new>

#include "biofm/core/device_memory.h"
#include "biofm/core/error.h"

namespace biofm {

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::CPU;
  if (s == "cuda") {
    if (!cuda_available()) fail("--device cuda: no CUDA backend or GPU available");
    return Device::CUDA;
  }
  fail("--device must be cpu or cuda, got '", s, "'");
}

std::unique_ptr<LanguageModel> load_model(const ModelFamily& family, const std::string& dir, Device dev) {
  try {
    return family.load(dir, dev, BuildOptions{});
  } catch (const std::bad_alloc&) {
    fail(dir, ": not enough memory for this model (check the sizes in its config.json)");
  }
}

ReaderOptions reader_options(const Flags& f) {
  ReaderOptions ro;
  ro.format = f.get("--format", "auto");
  ro.column = f.get("--column", "sequence");
  return ro;
}

}  // namespace biofm
