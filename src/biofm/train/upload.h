// Host → device batch transfer. On CUDA the five index arrays of a batch are packed into
// one pinned staging buffer (a small ring, each slot guarded by an event) and sent with one
// asynchronous copy on the compute stream, so the host never waits for the GPU here.
#pragma once
#include "biofm/data/batch.h"

namespace biofm {

// The batch on `device` (a copy; returns the batch itself for the CPU).
Batch upload_batch(const Batch& b, Device device);

}  // namespace biofm
