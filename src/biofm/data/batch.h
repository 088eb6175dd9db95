// A micro batch as the models consume it: packed token rows (THD) described by cu_seqlens.
// A padded batch (BSHD) is the same thing with seq_lens[s] < cu_seqlens[s+1] - cu_seqlens[s]:
// the slots past a sequence's end are padding (id = pad, label = -100).
// A THD batch padded to a multiple of N rows (pad_to_multiple_of) has its padding rows after
// the last sequence, inside that sequence's slot. Padding rows have position 0.
// Built by BatchBuilder (pack.h); see docs/DATA.md.
#pragma once
#include <cstdint>
#include <memory>

#include "biofm/core/tensor.h"

namespace biofm {

// What a batch's attention depends on, known before the batch is built (so that a model can
// prepare for batches ahead: LanguageModel::prepare_forward).
struct BatchShape {
  int64_t sequences = 0, rows = 0;
  int32_t max_seqlen = 0;
  bool uniform = false;  // as Batch::uniform()
};

// Context parallelism (data/context_parallel.h): this batch is one rank's share of a batch
// whose sequences are split over the ranks of a context-parallel group. Each sequence s of the
// group's batch is padded to a multiple of 2·cp_size rows and cut into 2·cp_size chunks; rank r
// holds chunks r and 2·cp_size-1-r (the recipes' load-balanced split: causal attention costs the
// same on every rank). Token-wise work runs on the local rows; attention gathers every rank's
// keys and values into the group's layout ("global", one slot of padded length per sequence)
// and attends with the local rows' queries.
struct ContextParallelShard {
  int cp_rank = 0, cp_size = 1;
  Tensor global_cu_seqlens;  // I32 [B+1]: slot starts in the group's layout
  Tensor global_seq_lens;    // I32 [B]: real tokens of each sequence (the whole sequence)
  int32_t global_max_seqlen = 0;
  int64_t global_rows = 0;   // = cp_size · local rows
  bool global_uniform = false;
  Tensor local_to_global;    // I32 [T]: the global row of each local row
  Tensor gathered_to_global; // I32 [global_rows]: for each global row, its row in the gathered
                             // buffer (rank k's local rows at [k·T, (k+1)·T))
  Tensor token_dropout_scale;  // F32 [T]: ESM-2 token dropout's row factors from whole sequences
  int64_t group_label_tokens = 0;  // label tokens of the group's batch (all ranks' shares)

  ContextParallelShard to(Device d) const;
};

struct Batch {
  Tensor input_ids;   // I32 [T]
  Tensor labels;      // I32 [T]; -100 where no loss is taken
  Tensor positions;   // I32 [T]; position of the token inside its sequence (0 at its start)
  Tensor cu_seqlens;  // I32 [B+1]; start row of each sequence, last entry = T
  Tensor seq_lens;    // I32 [B]; real tokens of each sequence
  int32_t max_seqlen = 0;         // max of seq_lens
  int64_t num_real_tokens = 0;    // sum of seq_lens
  int64_t num_label_tokens = 0;   // labels != -100
  std::shared_ptr<const ContextParallelShard> cp;  // set: a context-parallel share (above)
  int64_t num_sequences() const { return seq_lens.defined() ? seq_lens.numel() : 0; }
  int64_t num_rows() const { return input_ids.defined() ? input_ids.numel() : 0; }
  // Every sequence exactly max_seqlen tokens, back to back, no padding rows (full windows).
  // Since each slot holds at least its sequence, rows == sum(seq_lens) == B·max_seqlen forces it.
  bool uniform() const {
    return num_sequences() > 0 && max_seqlen > 0 && num_real_tokens == num_sequences() * max_seqlen &&
           num_rows() == num_real_tokens;
  }

  BatchShape shape() const { return {num_sequences(), num_rows(), max_seqlen, uniform()}; }

  Batch to(Device d) const {
    Batch b = *this;
    b.input_ids = input_ids.to(d);
    b.labels = labels.to(d);
    b.positions = positions.to(d);
    b.cu_seqlens = cu_seqlens.to(d);
    b.seq_lens = seq_lens.to(d);
    if (cp) b.cp = std::make_shared<const ContextParallelShard>(cp->to(d));
    return b;
  }
};

}  // namespace biofm
