// Hidden states of many sequences: tokenize, cut long records into windows (or truncate them),
// pack the windows longest first into THD batches under a token budget, run the model's
// forward-only pass (nothing kept for backward), pool each window's states where they are, and
// put the results back in input order. One call handles a contiguous range of records, so a
// caller streaming to disk holds one shard's results at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "biofm/data/dataset.h"
#include "biofm/data/tokenizer.h"
#include "biofm/infer/pooling.h"
#include "biofm/infer/progress.h"
#include "biofm/models/language_model.h"

namespace biofm::infer {

struct EmbedOptions {
  std::vector<int> layers;  // resolved: 0 = embeddings, L = final (normed) states
  Pooling pooling = Pooling::Mean;
  bool per_token = false;   // every token's states as well (implied by Pooling::None)
  bool logits = false;      // every token's logits (with per_token)
  int64_t window_tokens = 1024;  // tokens per window / per sequence, specials included (>= 3)
  bool windows = false;          // false: longer records are truncated to window_tokens
  int64_t stride = 0;            // windows: bases shared by consecutive windows
  int64_t max_tokens = 8192;     // tokens per batch
  DType act_dtype = DType::F32;  // the model's hidden-state dtype (BF16 in a bf16 GPU run)
  // Called on run()'s thread after each batch's results are in; it may throw to stop the run
  // (the Python module checks for Ctrl-C there).
  std::function<void()> after_batch;
};

// Records [first, first + n) in input order.
struct EmbedResult {
  std::vector<Tensor> pooled;        // per layer: F32 [n, H] (unless pooling none)
  std::vector<Tensor> token_states;  // per layer: F32 [T, H] (per_token): <begin> residues <end>
  std::vector<int32_t> ids;          // [T] (per_token)
  std::vector<int64_t> offsets;      // [n + 1] first row of each record (per_token)
  Tensor logits;                     // F32 [T, V] (per_token + logits)
  uint64_t truncated = 0;            // records cut to window_tokens
  uint64_t unknown = 0;              // residues that map to <unk>
  uint64_t windows = 0;              // windows run (records split into several count each)
  int64_t tokens = 0;                // tokens fed to the model
};

class Embedder {
 public:
  Embedder(LanguageModel& model, const Tokenizer& tok, EmbedOptions o, bool causal);
  EmbedResult run(const SequenceDataset& data, uint64_t first, uint64_t n, Progress* progress = nullptr);
  const EmbedOptions& options() const { return o_; }

 private:
  LanguageModel& model_;
  const Tokenizer& tok_;
  EmbedOptions o_;
  bool causal_;
};

// Tokens a record feeds to the model (all its windows, specials included): for progress / ETA.
int64_t record_tokens(uint64_t length, const EmbedOptions& o);
// Rows a record takes in the per-token outputs (<begin>, each kept residue once, <end>).
int64_t record_rows(uint64_t length, const EmbedOptions& o);

}  // namespace biofm::infer
