// Training checkpoints: ckpt_dir/step_N/ holding the model, the optimizer moments, the
// trainer state (step, data cursor, seed) and the resolved config, with a manifest of
// sizes and CRC32s. A checkpoint is written into a hidden temporary directory and renamed
// into place only when whole, so a crash mid-save leaves the previous one intact and no
// half step_N that resume could pick. Files are streamed (bounded host memory, CRC32 computed
// while writing; loads verify by streaming over a memory mapping), see io/safetensors.h.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "biofm/core/tensor.h"
#include "biofm/models/language_model.h"
#include "biofm/train/optimizer.h"

namespace biofm {

class Coordinator;

struct CheckpointContents {
  int64_t step = 0;              // optimizer steps completed
  uint64_t data_cursor = 0;      // global sample cursor of the training data
  std::string state_json;        // free-form trainer state (JSON object text)
  std::string config_yaml;       // the resolved config
  std::map<std::string, std::map<std::string, Tensor>> files;  // file stem → tensors
};

// Writes ckpt_dir/step_<step>/ atomically, then deletes the oldest step dirs beyond `keep`
// (those resume_training_checkpoint found unusable in this process are neither counted nor
// deleted). Returns the final directory.
std::string save_checkpoint(const std::string& ckpt_dir, const CheckpointContents& c, int keep);

// Step directories under ckpt_dir with a complete manifest, ascending by step. incomplete: also
// those without a manifest that are not empty (resume reports each as unusable; an empty step_N
// is not a checkpoint at all).
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& ckpt_dir, bool incomplete = false);

// Loads and verifies (sizes, CRC32) a step directory; corrupt files throw naming them.
CheckpointContents load_checkpoint(const std::string& step_dir);

// The newest verifiable checkpoint, if any. A newest one that fails verification is
// reported on stderr and the next older one is tried.
std::optional<CheckpointContents> load_latest_checkpoint(const std::string& ckpt_dir,
                                                         std::string* chosen_dir = nullptr);

// What the trainer saves besides the model and the optimizer.
struct TrainerState {
  int64_t step = 0;          // optimizer steps completed
  uint64_t data_cursor = 0;  // global sample cursor of the training data
  std::string state_json;    // free-form trainer state (JSON object text)
  std::string config_yaml;   // the resolved config
  int64_t gemm_choices = -1; // on resume: GEMM algorithm choices taken from the checkpoint (-1: none)
  // On resume: what the checkpoint holds that this run does not use (DelayedScaling's state under
  // another recipe), one line each, for rank 0 to print as "note: ...".
  std::vector<std::string> notes;
};

// Creates and removes a temporary directory holding a small file under ckpt_dir (which exists),
// so that a directory checkpoints cannot be written into fails at start, not at the first save.
void probe_checkpoint_dir(const std::string& ckpt_dir);

// Removes .tmp_step_* directories under ckpt_dir left by a save that was killed (those of
// live processes other than this one are kept), printing one line for each.
void remove_stale_tmp_dirs(const std::string& ckpt_dir);

// A training checkpoint of `model` and `opt`: ckpt_dir/step_<step>/, written atomically, the
// oldest beyond `keep` deleted. The directory also holds the model's config.json and tokenizer
// files (save_hf_metadata), so it loads as a Hugging Face model directory. Returns it.
// Multi-process (ranks given): every rank calls it; rank 0 writes the shared files and the
// manifest, and a sharded optimizer's ranks each write their shard of the moments in parallel
// (optimizer-rankR-of-W.safetensors, with the flat range it covers); with sharded parameters
// (fsdp) each rank writes the masters it holds the same way (model-rankR-of-W.safetensors, in
// place of model.safetensors: nothing is gathered). Returns when the checkpoint is in place.
// Resume reads either layout on any number of ranks, and so do embed/eval/score --model.
std::string save_training_checkpoint(const std::string& ckpt_dir, const TrainerState& st, const LanguageModel& model,
                                     const AdamW& opt, int keep, Coordinator* ranks = nullptr);
// Restores `model` and `opt` from the newest checkpoint under ckpt_dir that verifies and loads
// (each one skipped, a step directory without a manifest too, is reported on stderr) and returns
// its state; nullopt when there is none. The ones skipped stay in place, and the rotation of this
// process's saves neither counts nor deletes them.
// current_config_yaml (the run's resolved config, to_yaml): a checkpoint written for another
// model (model.family or model.config differ, beyond the initialization-only keys) is not
// skipped but fails the resume, naming the keys: resuming it would train another model, and
// starting over would overwrite that run's checkpoints.
std::optional<TrainerState> resume_training_checkpoint(const std::string& ckpt_dir, LanguageModel& model, AdamW& opt,
                                                       std::string* chosen_dir = nullptr,
                                                       const std::string& current_config_yaml = "");

// The settings of a resumed run that differ from its checkpoint's and change what it trains on
// (seed: the data order; dataset.path: what the data cursor counts) or how (the optimizer's
// lr, betas, eps and weight_decay, clip_grad_norm, the scheduler's keys and num_train_steps where
// they shape the schedule, the batch keys, dataset.mlm_probability), one sentence each, for
// notes; saved_yaml and current_yaml are resolved configs (to_yaml). grad_acc_steps is not among
// them: the trainer notes a change of the global batch, which also counts the ranks.
std::vector<std::string> resume_differences(const std::string& saved_yaml, const std::string& current_yaml);

}  // namespace biofm
