// Safetensors headers and payloads: the mapped reader, a copy of every tensor into F32 (the
// weight-loading path, with F16/BF16 conversion) and the whole-file reader.
#include "biofm/core/error.h"
#include "biofm/io/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = biofm::fuzz::write_temp(data, size, ".safetensors");
  try {
    biofm::MappedSafetensors f(path);
    for (const biofm::SafetensorsEntry& e : f.entries()) {
      if (e.begin + e.nbytes > size) std::abort();  // every entry lies inside the file
      if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16") continue;
      biofm::Tensor t = biofm::Tensor::empty(e.shape, biofm::DType::F32);
      f.copy_into(e, t);
    }
  } catch (const biofm::Error&) {
  }
  try {
    biofm::read_safetensors(path);
  } catch (const biofm::Error&) {
  }
  return 0;
}
