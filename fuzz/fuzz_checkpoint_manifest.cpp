// A checkpoint's manifest.json and trainer_state.json (what resume reads before any file).
#include "biofm/core/error.h"
#include "biofm/io/checkpoint_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const biofm::ManifestFile& f : biofm::parse_checkpoint_manifest(text, "manifest.json"))
      if (f.name.empty() || f.name.find('/') != std::string::npos) std::abort();
  } catch (const biofm::Error&) {
  }
  try {
    biofm::TrainerStateFields s = biofm::parse_trainer_state(text, "trainer_state.json", size % 2 ? 7 : -1);
    if (s.step < 0) std::abort();
  } catch (const biofm::Error&) {
  }
  return 0;
}
