// Inference batches: items (sequences or windows of them) packed into THD batches under a token
// budget, longest first, so batches are full and padding-free while results still go back to
// the items' own slots (the caller restores input order).
#pragma once
#include <cstdint>
#include <vector>

#include "biofm/data/batch.h"
#include "biofm/data/causal.h"

namespace biofm::infer {

// Groups of item indices: items sorted by length (longest first, ties by index), each group's
// token count at most max_tokens (an item longer than the budget forms its own group).
std::vector<std::vector<int64_t>> plan_batches(const std::vector<int64_t>& lengths, int64_t max_tokens);

// The shape of each planned batch as BatchBuilder packs it (THD, no padding rows), for
// LanguageModel::prepare_forward.
std::vector<BatchShape> batch_shapes(const std::vector<std::vector<int64_t>>& plan, const std::vector<int64_t>& lengths);

// One window of a record for hidden states: bases [start, start+length) wrapped in the
// tokenizer's begin/end tokens; the bases [keep_begin, keep_end) take their states from it.
// Overlaps are split so that every base is taken from exactly one window: causal models take
// a base from the first window holding it (the most left context, as eval scores it);
// bidirectional models split each overlap at its midpoint (each base from the window where it
// sits farther from the edge).
struct KeptWindow {
  uint64_t start = 0, length = 0;
  uint64_t keep_begin = 0, keep_end = 0;
};
// window_tokens: tokens per window, specials included (>= 3); stride: bases shared by
// consecutive windows (< window_tokens - 2).
std::vector<KeptWindow> kept_windows(uint64_t length, int64_t window_tokens, int64_t stride, bool causal);

}  // namespace biofm::infer
