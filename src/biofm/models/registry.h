// Model families by name: build from a training config, or load a Hugging Face directory.
#pragma once
#include <memory>
#include <string>

#include "biofm/models/language_model.h"
#include "biofm/train/config.h"

namespace biofm {

// fp32 on the CPU; the config's precision on CUDA ("fp32" → F32, "bf16-mixed" → Bf16Mixed,
// "bf16" → Bf16: pure bf16 parameters).
Precision precision_for(const TrainConfig& cfg, Device device);
// The FP8 recipe of fp8_config (nullopt when off); an error for a combination that cannot run.
std::optional<ops::Fp8Recipe> fp8_recipe_for(const TrainConfig& cfg, Device device);

// The model the config describes: loaded from model.init_from, else randomly initialised
// from model.config with the seed.
std::unique_ptr<LanguageModel> make_model(const TrainConfig& cfg, Device device);

// A Hugging Face directory (config.json + model.safetensors); the family comes from
// config.json's model_type ("esm" or "llama").
std::unique_ptr<LanguageModel> load_model_dir(const std::string& dir, Device device,
                                              Precision precision = Precision::F32);
std::string model_type_of_dir(const std::string& dir);

}  // namespace biofm
