// Pooling hidden states where they are (on the GPU in a GPU run): a batch's [T, H] states are
// reduced to one row per item by one GEMM with a 0/1 selection matrix, so only [items, H] comes
// back to the host instead of every token's state.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "biofm/core/tensor.h"

namespace biofm::infer {

// --pooling: mean over the residues (special tokens excluded); cls = the first token (<cls> /
// <BOS>); last = the last token (<eos> / <EOS>: in a causal model it has seen every token fed
// with it, so the whole sequence only when it fits one window untruncated); none = every token's
// state. A record cut into windows (infer/embedder.h): mean averages the joined per-residue
// states (each residue once), cls takes the first window's first token, last the last window's
// last token, which has seen that window only (at most window - 2 residues).
enum class Pooling { Mean, Cls, Last, None };
Pooling parse_pooling(const std::string& s);
const char* pooling_name(Pooling p);

// sums[r, :] = Σ_{t in rows[r]} hidden[t, :], as F32 [rows.size(), H] on the host. hidden: [T, H]
// F32 or BF16 on any device; on the device the sum is a GEMM with fp32 accumulation (selection
// matrix of exact 0/1 entries in hidden's dtype). Row indices must lie in [0, T).
Tensor select_sum(const Tensor& hidden, const std::vector<std::vector<int32_t>>& rows);

// The same in steps, so that a GPU run uploads the selection before the forward pass and reads
// the result after it: selection_matrix builds selᵀ [T, R rounded up to 8] on the host in
// `dtype` (the hidden states' dtype); launch_select_sum queues the GEMM (sel_t already on
// hidden's device) and returns the device result F32 [R8, H]; finish_select_sum copies the first
// num_rows rows to the host.
Tensor selection_matrix(const std::vector<std::vector<int32_t>>& rows, int64_t T, DType dtype);
Tensor launch_select_sum(const Tensor& hidden, const Tensor& sel_t);
Tensor finish_select_sum(const Tensor& launched, int64_t num_rows);

}  // namespace biofm::infer
