// Autoregressive generation with a Llama model: continue a prompt token by token.
//
// Cached path: the prompt runs once through the model, filling a per-layer key/value cache
// (LlamaModel::forward_cached); every further step feeds only the newest token and computes
// only its row, attending to the cache through ops::attention_decode (CPU or CUDA; the cache
// lives on the model's device in its activation dtype). Uncached reference path: every step
// runs the full forward over the whole prefix and reads the last row. Both pick tokens with
// the same sampler, so for the same options they produce the same tokens (up to fp32
// rounding of near-tied logits).
//
// Sampling: temperature 0 = greedy (argmax, lowest id on ties); else softmax(logits / T)
// restricted to the top_k largest logits (top_k 0 = all), drawn by inverse CDF with the
// uniform rng_uniform(seed, RngStream::Sample, step, 0): a pure function of (seed, step).
// Both pick among `allowed` only when it is given (the CLI: the nucleotide codes and <EOS>, so
// that a byte-level DNA model cannot print bytes that are not bases).
#pragma once
#include <cstdint>
#include <vector>

#include "biofm/models/llama/model.h"

namespace biofm {

struct GenerateOptions {
  int64_t max_new_tokens = 100;
  float temperature = 0.0f;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no top-k filter
  uint64_t seed = 42;
  bool stop_at_eos = true;   // stop after emitting the config's eos_token_id
  bool use_cache = true;
  std::vector<int32_t> allowed;  // the token ids it may pick (empty: every id)
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens (the EOS included when it stopped there)
  bool stopped_at_eos = false;
};

// Picks the next token from one row of logits [V] (host floats) for step `step` (0-based).
int32_t sample_next_token(const float* logits, int64_t V, const GenerateOptions& o, uint64_t step);

// Continues `prompt` (token ids, usually <BOS> followed by the bases).
GenerateResult generate(LlamaModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& o);
GenerateResult generate_uncached(LlamaModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& o);

}  // namespace biofm
