// Context parallelism's data side: one rank's share of a context-parallel group's batch.
//
// The group's ranks all read the same batch (data parallelism hands batches to groups, not to
// ranks). Each then keeps its own rows, as the BioNeMo recipes split sequences for
// Transformer Engine's context parallelism: sequence s (L real tokens) is padded to
// Lp = L rounded up to a multiple of 2·C rows (C = cp_size) and cut into 2·C chunks of Lp/(2·C)
// rows; rank r keeps chunks r and 2·C-1-r, so that under causal attention every rank has as
// many query-key pairs as the others. Positions stay those of the whole sequence (rotary
// embeddings see where each token really is). The padding sits at a sequence's end, so a rank's
// real rows of a sequence always come first in its share and the share is a valid Batch
// (batch.h). The ContextParallelShard it carries says how to put the group's rows back together
// for attention (models/blocks/attention.cpp) and holds ESM-2's token-dropout factors, which
// depend on a whole sequence's count of mask tokens.
#pragma once
#include <memory>

#include "biofm/data/batch_source.h"

namespace biofm {

// Rank cp_rank's share of `group` (a CPU batch). pad_id fills the padding rows; mask_id is the
// token whose share of a sequence ESM-2's token dropout rescales by (-1: none; the factors are
// then 1 for real rows, 0 for padding, as ops::esm_token_dropout_forward with mask_id < 0).
Batch context_parallel_share(const Batch& group, int cp_rank, int cp_size, int32_t pad_id, int32_t mask_id);

// A source whose batches (training and held-out) are cp_rank's shares of `inner`'s.
std::unique_ptr<BatchSource> slice_for_context_parallel(std::unique_ptr<BatchSource> inner, int cp_rank,
                                                        int cp_size, int32_t pad_id, int32_t mask_id);

}  // namespace biofm
