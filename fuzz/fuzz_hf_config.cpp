// Hugging Face config.json of each family: esm2_config_from_hf_json and
// llama_config_from_hf_json, then the writers and a re-read of what was written.
#include "biofm/core/error.h"
#include "biofm/models/esm2/config.h"
#include "biofm/models/llama/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    biofm::Esm2Config c = biofm::esm2_config_from_hf_json(text, "config.json");
    if (c.num_parameters() <= 0) std::abort();
    biofm::esm2_config_from_hf_json(biofm::esm2_config_to_hf_json(c), "written");  // must re-read
  } catch (const biofm::Error&) {
  }
  try {
    biofm::LlamaConfig c = biofm::llama_config_from_hf_json(text, "config.json");
    if (c.num_parameters() <= 0) std::abort();
    (void)c.inv_freq();
    biofm::llama_config_from_hf_json(biofm::llama_config_to_hf_json(c), "written");
  } catch (const biofm::Error&) {
  }
  return 0;
}
