// One rank's share of the global batch stream. Training is defined by one deterministic stream
// of micro batches (seed, data order, masking, packing: the same whatever the number of ranks);
// a step takes world × grad_acc consecutive ones, and rank r trains on micro batches
// [r·grad_acc, (r+1)·grad_acc) of each step's group. So 2 ranks × 1 micro batch and 1 rank × 2
// micro batches see the same batches, and the cursor after a step is the same on every rank
// (the global one: checkpoints resume on any number of ranks).
//
// Every rank walks the whole stream and builds only its own batches: the others' are skipped
// by BatchSource::skip (counting lengths, no tokenizing or masking where the source can).
// Held-out batches: rank r evaluates batches r, r + world, ... (the sums are then added over
// ranks).
#pragma once
#include <memory>

#include "biofm/data/batch_source.h"

namespace biofm {

std::unique_ptr<BatchSource> slice_for_rank(std::unique_ptr<BatchSource> global, int rank, int world,
                                            int micro_per_step);

}  // namespace biofm
