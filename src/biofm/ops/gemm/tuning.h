// ops.gemm_autotune's choices, kept with a checkpoint. A tuned choice rests on timings, so a
// run that tuned again on resume could pick another algorithm (another summation order) and
// drift from the run it continues. The choices (tuning bucket -> cuBLASLt algorithm) go into
// the checkpoint as an opaque table; a resumed run takes them instead of timing again, so
// its steps are those the uninterrupted run would have taken. Every rank loads the same table.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace biofm::ops {

// The table of this process's tuned choices; empty when nothing was tuned (and in CPU-only
// builds).
std::string gemm_tuning_table();

// Replaces this process's tuned choices with a saved table and returns how many it holds.
// A table made with another cuBLASLt version or another GPU model changes nothing: returns -1
// with the reason in *why (its algorithms may not exist here). A malformed table throws.
int64_t load_gemm_tuning_table(std::string_view table, std::string* why);

// Forgets every tuned choice (a new process's state), so that GEMMs are timed again.
void clear_gemm_tuning();

}  // namespace biofm::ops
