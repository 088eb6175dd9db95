// The cuBLASLt plumbing shared by the bf16/fp32 linear layers (cuda.cu) and the FP8 ones
// (fp8_cuda.cu): a GEMM described by a key, its descriptors and heuristic algorithm built once
// and cached for the process. Internal to the gemm op family (CUDA sources only).
#pragma once
#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "biofm/core/tensor.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops::cuda::gemm_detail {

// Every field is 64-bit, so the key has no padding and compares and hashes as bytes.
struct GemmKey {
  int64_t ta, tb;  // cublasOperation_t
  int64_t m, n, k, lda, ldb, ldc;
  int64_t a_type, b_type, cd_type, bias_type;  // cudaDataType_t
  int64_t epilogue;                            // cublasLtEpilogue_t
  int64_t fast_accum;                          // FP8 only: accumulate without periodic fp32 promotion
  int64_t block_scaled;  // FP8 only: a_scale / b_scale are VEC128 tensors (one per 128 of K per row), not scalars
  int64_t align_a, align_b, align_c;           // bytes
  bool operator==(const GemmKey& o) const { return std::memcmp(this, &o, sizeof(GemmKey)) == 0; }
};
static_assert(sizeof(GemmKey) == 18 * sizeof(int64_t), "GemmKey must have no padding");

// Largest power of two (up to 256) that divides the address: cuBLASLt picks kernels that
// assume at most this alignment.
uint32_t alignment_of(const void* p);

// D = op(A)·op(B) in column-major terms (see cuda.cu for how row-major tensors map), with A
// and B of dtype ab and C/D of dtype cd (F32 or BF16), no epilogue.
GemmKey make_key(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                 int64_t ldb, int64_t ldc, DType ab, DType cd, const void* A, const void* B, const void* D);

std::string describe(const GemmKey& k);

// Runs D = alpha·(a_scale·b_scale)·op(A)·op(B) + beta·C (+ bias, or bias gradient into `bias`,
// by the key's epilogue); C (same layout as D) defaults to D. a_scale / b_scale are device
// floats (FP8 operands' dequantisation scales), null for none. Returns false (nothing queued)
// when cuBLASLt has no algorithm; with `optional`, also when cuBLASLt rejects the
// configuration, and the key is remembered as unavailable.
bool run_plan(const GemmKey& key, const void* A, const void* B, void* D, float alpha, float beta,
              const void* bias, bool optional = false, const void* C = nullptr, const float* a_scale = nullptr,
              const float* b_scale = nullptr);

// Whether cuBLASLt has an algorithm for this GEMM (asked once per key, as run_plan asks; a key
// with lower alignments than a later call's asks for no more than that call needs).
bool plan_exists(const GemmKey& key);

// FP8 operands (fp8_cuda.cu, fp8_block_cuda.cu): the cuBLASLt type of a format; make_key's key
// with FP8 A / B types and the accumulation mode; t in dtype dt at a 16-byte aligned address
// (itself, or a converted copy: a bias the GEMM epilogue reads).
cudaDataType_t fp8_cuda_type(Fp8Type t);
GemmKey fp8_key(GemmKey key, Fp8Type a, Fp8Type b, bool fast_accum);
Tensor aligned_in_dtype(const Tensor& t, DType dt);

// Argument checks shared by the bf16/fp32 and FP8 linear layers (errors name op and tensor);
// they return the rows N and the in / out features I, O.
struct LinearDims {
  int64_t N, I, O;
};
void check_weight(const Tensor& w, const char* op);  // a float [out, in] matrix
LinearDims check_linear_forward(const char* op, const Tensor& out, const Tensor& x, const Tensor& w,
                                const Tensor& bias, const Tensor& residual);
LinearDims check_linear_backward(const char* op, const Tensor& dx, const Tensor& dw, const Tensor& dbias,
                                 const Tensor& dout, const Tensor& x, const Tensor& w);

// dbias[O] (F32) += column sums of g[N, O] (F32 or BF16), deterministic.
void column_sums_into(Tensor& dbias, const Tensor& g);
// dbias[O] += Σ_split partial[split, O] (partial: device F32 [splits, O]), in a fixed order:
// the finishing pass of column_sums_into, shared with kernels that make the partial sums
// themselves (fp8_quantize's col_sums).
void column_partials_into(float* dbias, int64_t O, const float* partial, int64_t splits);

}  // namespace biofm::ops::cuda::gemm_detail
