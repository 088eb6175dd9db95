// Assembling tokenized sequences into a Batch (batch.h), packed (THD) or padded (BSHD).
//
// THD: sequences are laid end to end; cu_seqlens[s] is the first row of sequence s. With
//      pad_to_multiple_of > 1 the total row count is rounded up by growing the last
//      cu_seqlens entry: the padding rows belong to the last sequence's slot, with id = pad,
//      label -100, position 0, and seq_lens keeps the real lengths.
// BSHD: every sequence gets S rows (S = longest sequence of the batch, rounded up to
//      pad_to_multiple_of), cu_seqlens = [0, S, 2S, ...], padding as above.
// In both, positions restart at 0 for each sequence, max_seqlen = max(seq_lens),
// num_real_tokens = sum(seq_lens), num_label_tokens = count(labels != -100).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "biofm/data/batch.h"

namespace biofm {

enum class BatchMode { Thd, Bshd };
BatchMode parse_batch_mode(std::string_view name);  // "thd" | "bshd" (case-insensitive)

// How many samples one micro batch takes from the sample stream, from token counts only (a
// batcher's skip() without building the batch): THD packs whole samples while they fit under
// max_tokens (always at least one); BSHD takes micro_batch_size. tokens_at(k): the token count
// of the k-th sample from the cursor.
template <class TokensAt>
uint64_t samples_in_batch(BatchMode mode, int64_t max_tokens, int64_t micro_batch_size, TokensAt tokens_at) {
  if (mode != BatchMode::Thd) return uint64_t(micro_batch_size);
  int64_t tokens = 0;
  uint64_t k = 0;
  for (;; ++k) {
    const int64_t n = tokens_at(k);
    if (k > 0 && tokens + n > max_tokens) break;
    tokens += n;
    if (tokens == max_tokens) return k + 1;
  }
  return k;
}
const char* batch_mode_name(BatchMode m);

constexpr int32_t kIgnoreLabel = -100;

class BatchBuilder {
 public:
  void clear();
  // Appends one sequence (ids and labels of equal length n > 0).
  void add(const int32_t* ids, const int32_t* labels, int64_t n);
  int64_t num_sequences() const { return int64_t(lens_.size()); }
  int64_t num_tokens() const { return int64_t(ids_.size()); }
  // Builds the CPU batch. pad_to_multiple_of <= 1 means no rounding.
  Batch build(BatchMode mode, int64_t pad_to_multiple_of, int32_t pad_id) const;

 private:
  std::vector<int32_t> ids_, labels_, lens_;
};

}  // namespace biofm
