// From a training config to the objects a run needs: the model (built or imported, with its
// precision, recompute policy and FP8 recipe) and the batch source, both through the model
// family's registry entry (models/registry.h).
#pragma once
#include <memory>
#include <optional>

#include "biofm/data/batch_source.h"
#include "biofm/models/registry.h"
#include "biofm/train/config.h"

namespace biofm {

Device device_of(const TrainConfig& cfg);
// fp32 on the CPU; the config's precision on CUDA.
Precision precision_for(const TrainConfig& cfg, Device device);
// What a run on `device` computes in, as train's and bench's banners say it: the precision that
// runs ("fp32; precision=bf16-mixed is for CUDA" on the CPU when the config asked otherwise),
// then the FP8 format if enabled ("emulated" on the CPU).
std::string describe_precision(const TrainConfig& cfg, Device device);
// The FP8 formats of fp8_config (nullopt when off); an error for a combination that cannot run.
std::optional<ops::Fp8Recipe> fp8_recipe_for(const TrainConfig& cfg, Device device);
// What each of the model's `layers` transformer layers runs in, from fp8_config, fp4_config,
// fp8_layers and fp4_layers (docs/PRECISION.md); empty when neither format is enabled. An error
// names the key for a setting that is invalid or cannot run on `device`.
std::vector<ops::LayerQuant> layer_quant_for(const TrainConfig& cfg, Device device, int layers);
// The ops.* keys into ops::set_op_options (before the first op runs).
void apply_op_options(const TrainConfig& cfg);
// The dataset section as the batchers read it.
DataOptions data_options(const TrainConfig& cfg);

// The model the config describes: loaded from model.init_from, else randomly initialised
// from model.config with the seed.
// shard: fsdp builds only this rank's part of the parameters (models/params.h).
std::unique_ptr<LanguageModel> make_model(const TrainConfig& cfg, Device device, ParamShard shard = {});
// The training (val = false) or validation data of the config: a directory written by `biofm
// prepare` is memory-mapped (its dataset.split / dataset.val_split), anything else is read into
// memory (dataset.format, column, on_error); with dataset.weights the training path's list
// entries are blended (data/blend.h). With `notes` (rank 0), residues that training learns nothing
// about (outside the tokenizer's alphabet: data/alphabet.h) are counted and noted once per entry:
// for files read into memory, as they are loaded; for a stream, when its first pass over the
// files ends (a prepared directory's were noted by prepare).
std::unique_ptr<SequenceCorpus> load_corpus(const TrainConfig& cfg, bool val, bool notes = false);
// The family's batches over `data` (which must outlive the source).
std::unique_ptr<BatchSource> make_batch_source(const TrainConfig& cfg, const SequenceCorpus& data);

}  // namespace biofm
