// The cuBLASLt plan cache behind every linear layer on the GPU (cuda.cu, fp8_cuda.cu,
// fp8_block_cuda.cu): a GEMM described by a GemmKey gets its descriptors and algorithm once
// and keeps them for the process. Host code (compiled by the C++ compiler in CUDA builds).
//
// Algorithm choice: cuBLASLt's heuristic's first candidate, or with ops.gemm_autotune (default)
// the fastest of its first kTuneCandidates, timed on the GEMM's first call. The choice is
// shared by every GEMM of the same tuning bucket (m, n, k rounded up to multiples of 1024), so
// packed batches of varying token counts tune once rather than per count; later keys of a bucket
// take its algorithm where cuBLASLt accepts it for their exact shape (cublasLtMatmulAlgoCheck),
// else their own heuristic's first. The choice rests on timings, so two fresh runs may pick
// different algorithms (another summation order); a checkpoint keeps the choices and a resumed
// run takes them (gemm_tuning_table / load_gemm_tuning_table, tuning.h), so resuming does not
// change them. Measured on H100 (bench/gemm_algos_bench.cpp, session 14): the first candidate is
// up to 16% slower than the best for some shapes of a training step.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/error.h"
#include "biofm/ops/gemm/cublaslt_plans_cuda.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/gemm/tuning.h"
#include "biofm/ops/options.h"

namespace biofm::ops::cuda {
namespace gemm_detail {
namespace {

cudaDataType_t cuda_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

const char* type_name(int64_t t) {
  switch (cudaDataType_t(t)) {
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_32F: return "f32";
    case CUDA_R_8F_E4M3: return "e4m3";
    case CUDA_R_8F_E5M2: return "e5m2";
    default: return "?";
  }
}

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof(GemmKey); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return size_t(h);
  }
};

bool fused_bgrad_enabled() { return op_options().gemm_fused_bgrad; }
bool inplace_splitk_only() { return op_options().gemm_inplace_splitk; }
bool autotune_enabled() { return op_options().gemm_autotune; }

constexpr int kTuneCandidates = 8;  // heuristic results timed per tuning bucket
constexpr int kTuneRuns = 3;        // timed runs per candidate (after one untimed)
constexpr size_t kTuneMaxSavedBytes = size_t(256) << 20;

// The key whose tuned algorithm a GEMM shares: m, n, k rounded up to multiples of 1024, leading
// dimensions dropped (the exact key is checked against the algorithm before it is used).
GemmKey tuning_bucket(GemmKey k) {
  auto up = [](int64_t v) { return (v + 1023) / 1024 * 1024; };
  k.m = up(k.m);
  k.n = up(k.n);
  k.k = up(k.k);
  k.lda = k.ldb = k.ldc = 0;
  return k;
}

#define GEMM_CHECK(expr, key)                                                                   \
  do {                                                                                          \
    cublasStatus_t st_ = (expr);                                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                           \
      ::biofm::fail(__FILE__, ":", __LINE__, ": cuBLASLt error ", int(st_), " in " #expr " for ", \
                    describe(key));                                                             \
  } while (0)

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // the heuristic returned an algorithm (and cuBLASLt accepted it)
  // With ops.gemm_autotune: the heuristic's other candidates, timed on the first call when
  // this plan's tuning bucket has no choice yet.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool tuned = false;
};

class PlanCache {
 public:
  // Runs D = alpha·op(A)·op(B) + beta·C (+ bias, or bias gradient into `bias`) with C = D.
  // Returns false (nothing queued) when cuBLASLt has no algorithm for this GEMM, so that the
  // caller can take another route. With `optional` (a fused epilogue the caller can do
  // without), every heuristic failure and a cublasLtMatmul that rejects the configuration
  // (NOT_SUPPORTED / INVALID_VALUE: checked before anything is launched) also return false,
  // and the key is remembered as unavailable.
  // C (same layout as D) defaults to D itself.
  bool exists(const GemmKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return get(key, nullptr, /*optional=*/true, nullptr, nullptr).found;
  }

  bool run(const GemmKey& key, const void* A, const void* B, void* D, float alpha, float beta,
           const void* bias, bool optional = false, const void* C = nullptr, const float* a_scale = nullptr,
           const float* b_scale = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    GemmPlan& plan = get(key, bias, optional, a_scale, b_scale);
    if (!plan.found) return false;
    if (a_scale)
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                                sizeof(a_scale)),
                 key);
    if (b_scale)
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                                sizeof(b_scale)),
                 key);
    if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)),
                 key);
    if (!plan.tuned) tune(key, plan, A, B, D, alpha, beta, C);
    const cublasStatus_t st =
        cublasLtMatmul(cuda_ctx::cublaslt(), plan.desc, &alpha, A, plan.a, B, plan.b, &beta, C ? C : D, plan.c, D,
                       plan.c, &plan.algo, cuda_ctx::cublaslt_workspace(), cuda_ctx::cublaslt_workspace_size(),
                       cuda_ctx::stream());
    if (optional && (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE)) {
      plan.found = false;
      return false;
    }
    GEMM_CHECK(st, key);
    return true;
  }

 private:
  GemmPlan& get(const GemmKey& key, const void* bias, bool optional, const float* a_scale, const float* b_scale) {
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
    auto plan = std::make_unique<GemmPlan>();
    build(*plan, key, bias, optional, a_scale, b_scale);
    return *plans_.emplace(key, std::move(plan)).first->second;
  }

  static void build(GemmPlan& p, const GemmKey& key, const void* bias, bool optional, const float* a_scale,
                    const float* b_scale) {
    GEMM_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), key);
    const cublasOperation_t ta_op = cublasOperation_t(key.ta), tb_op = cublasOperation_t(key.tb);
    GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta_op, sizeof(ta_op)), key);
    GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb_op, sizeof(tb_op)), key);
    if (key.block_scaled) {
      // cuBLASLt 13.1 offers VEC128 algorithms only when the scale pointers are already set at
      // the heuristic query (without them: INVALID_VALUE; docs/evidence/session11): the first
      // call's pointers go in here, every call sets its own below.
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)), key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)), key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                                sizeof(a_scale)),
                 key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                                sizeof(b_scale)),
                 key);
    }
    if (key.fast_accum) {
      const int8_t on = 1;
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on)), key);
    }
    if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      const cublasLtEpilogue_t epi = cublasLtEpilogue_t(key.epilogue);
      const int32_t bias_type = int32_t(key.bias_type);  // the attribute is an int32 cudaDataType
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof(bias_type)),
                 key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                 key);
    }
    // Stored (pre-op) shapes: op_N keeps rows x cols = m x k (A) / k x n (B).
    const bool ta = key.ta == CUBLAS_OP_T, tb = key.tb == CUBLAS_OP_T;
    const cudaDataType_t at = cudaDataType_t(key.a_type), bt = cudaDataType_t(key.b_type),
                         cd = cudaDataType_t(key.cd_type);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p.a, at, uint64_t(ta ? key.k : key.m),
                                          uint64_t(ta ? key.m : key.k), key.lda),
               key);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p.b, bt, uint64_t(tb ? key.n : key.k),
                                          uint64_t(tb ? key.k : key.n), key.ldb),
               key);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p.c, cd, uint64_t(key.m), uint64_t(key.n), key.ldc), key);

    cublasLtMatmulPreference_t pref = nullptr;
    GEMM_CHECK(cublasLtMatmulPreferenceCreate(&pref), key);
    const size_t ws = cuda_ctx::cublaslt_workspace_size();
    GEMM_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
               key);
    const uint32_t aligns[4] = {uint32_t(key.align_a), uint32_t(key.align_b), uint32_t(key.align_c),
                                uint32_t(key.align_c)};
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      GEMM_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &aligns[i], sizeof(uint32_t)), key);
    if (inplace_splitk_only()) {
      // Split-K parts summed in the output buffer (or no split-K): no separate reduction kernel.
      const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_INPLACE;
      GEMM_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                      sizeof(mask)),
                 key);
    }
    cublasLtMatmulHeuristicResult_t results[kTuneCandidates]{};
    int count = 0;
    const bool autotune = autotune_enabled();
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cuda_ctx::cublaslt(), p.desc, p.a, p.b, p.c, p.c,
                                                             pref, autotune ? kTuneCandidates : 1, results, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    p.tuned = !autotune;
    if (st == CUBLAS_STATUS_SUCCESS && count > 0) {
      p.algo = results[0].algo;
      p.found = true;
      for (int i = 0; i < count; ++i) p.candidates.push_back(results[i].algo);
    } else if (!optional && st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
      fail("cuBLASLt heuristic query failed (status ", int(st), ") for ", describe(key));
    }
  }

  // ops.gemm_autotune, on a plan's first call: take its bucket's algorithm where cuBLASLt accepts
  // it for this exact GEMM; otherwise, for the bucket's first GEMM, time the candidates on this
  // call's operands and keep the fastest (a one-time host synchronisation per bucket). A GEMM
  // that accumulates into D (beta != 0 with C = D) has D saved and restored around the timing.
  // Runs after run() has set the call's pointers (bias, scales) on the descriptor.
  void tune(const GemmKey& key, GemmPlan& p, const void* A, const void* B, void* D, float alpha, float beta,
            const void* C) {
    p.tuned = true;
    const GemmKey bucket = tuning_bucket(key);
    auto it = tuned_.find(bucket);
    if (it != tuned_.end()) {
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(cuda_ctx::cublaslt(), p.desc, p.a, p.b, p.c, p.c, &it->second, &check) ==
              CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= cuda_ctx::cublaslt_workspace_size())
        p.algo = it->second;
      return;
    }
    if (p.candidates.size() < 2) return;  // nothing to choose (and no choice to lend the bucket)
    // D's extent: n columns of ldc elements, the last one m long.
    const size_t d_bytes =
        (size_t(key.n - 1) * size_t(key.ldc) + size_t(key.m)) * (key.cd_type == CUDA_R_32F ? 4 : 2);
    const bool accumulates = beta != 0.0f && (C == nullptr || C == D);
    // Saving an accumulated D costs its size in memory for a moment; above kTuneMaxSavedBytes
    // (a vocabulary-sized weight gradient) the heuristic's choice stands.
    if (accumulates && d_bytes > kTuneMaxSavedBytes) return;
    Tensor saved;
    if (accumulates) {
      saved = Tensor::empty({int64_t(d_bytes)}, DType::U8, Device::CUDA);
      BIOFM_CUDA_CHECK(cudaMemcpyAsync(saved.raw(), D, d_bytes, cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
    }
    // Each timed run starts with the operands out of L2 (a 64 MiB scratch written before it), as in
    // a training step where they come from the layer before; timed hot, back to back, small
    // GEMMs favour algorithms that lose inside a step.
    const size_t flush_bytes = size_t(64) << 20;
    Tensor flush = Tensor::empty({int64_t(flush_bytes)}, DType::U8, Device::CUDA);
    // Timed alone: a GEMM tuned on the side stream (core/side_stream.h) would otherwise share the
    // GPU with the compute stream's queued work.
    if (cuda_ctx::stream() != cuda_ctx::compute_stream()) BIOFM_CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    BIOFM_CUDA_CHECK(cudaEventCreate(&e0));
    BIOFM_CUDA_CHECK(cudaEventCreate(&e1));
    float best = 0.0f;
    const void* Cin = C ? C : D;
    for (size_t i = 0; i < p.candidates.size(); ++i) {
      const cublasLtMatmulAlgo_t* algo = &p.candidates[i];
      if (cublasLtMatmul(cuda_ctx::cublaslt(), p.desc, &alpha, A, p.a, B, p.b, &beta, Cin, p.c, D, p.c, algo,
                         cuda_ctx::cublaslt_workspace(), cuda_ctx::cublaslt_workspace_size(),
                         cuda_ctx::stream()) != CUBLAS_STATUS_SUCCESS)
        continue;
      float ms = 0.0f;
      for (int r = 0; r < kTuneRuns; ++r) {
        BIOFM_CUDA_CHECK(cudaMemsetAsync(flush.raw(), r, flush_bytes, cuda_ctx::stream()));
        BIOFM_CUDA_CHECK(cudaEventRecord(e0, cuda_ctx::stream()));
        GEMM_CHECK(cublasLtMatmul(cuda_ctx::cublaslt(), p.desc, &alpha, A, p.a, B, p.b, &beta, Cin, p.c, D, p.c,
                                  algo, cuda_ctx::cublaslt_workspace(), cuda_ctx::cublaslt_workspace_size(),
                                  cuda_ctx::stream()),
                   key);
        BIOFM_CUDA_CHECK(cudaEventRecord(e1, cuda_ctx::stream()));
        BIOFM_CUDA_CHECK(cudaEventSynchronize(e1));
        float run_ms = 0.0f;
        BIOFM_CUDA_CHECK(cudaEventElapsedTime(&run_ms, e0, e1));
        ms += run_ms;
      }
      if (best == 0.0f || ms < best) {
        best = ms;
        p.algo = *algo;
      }
    }
    BIOFM_CUDA_CHECK(cudaEventDestroy(e0));
    BIOFM_CUDA_CHECK(cudaEventDestroy(e1));
    if (saved.defined())
      BIOFM_CUDA_CHECK(cudaMemcpyAsync(D, saved.raw(), d_bytes, cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
    ++tunings_;
    tuned_.emplace(bucket, p.algo);
  }

 public:
  size_t tunings() {
    std::lock_guard<std::mutex> lock(mu_);
    return tunings_;
  }

  // The tuned choices, ordered by key bytes (the same choices give the same table).
  std::vector<std::pair<GemmKey, cublasLtMatmulAlgo_t>> tuned_choices() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<GemmKey, cublasLtMatmulAlgo_t>> out(tuned_.begin(), tuned_.end());
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return std::memcmp(&a.first, &b.first, sizeof(GemmKey)) < 0; });
    return out;
  }

  // Replaces the tuned choices; plans built before take their bucket's choice on their next call.
  void replace_tuned_choices(const std::vector<std::pair<GemmKey, cublasLtMatmulAlgo_t>>& choices) {
    std::lock_guard<std::mutex> lock(mu_);
    tuned_.clear();
    for (const auto& [k, a] : choices) tuned_[k] = a;
    const bool autotune = autotune_enabled();
    for (auto& [k, p] : plans_) {
      if (!p->found || p->candidates.empty()) continue;
      p->algo = p->candidates[0];
      p->tuned = !autotune;
    }
  }

 private:

  std::mutex mu_;
  std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash> plans_;
  std::unordered_map<GemmKey, cublasLtMatmulAlgo_t, GemmKeyHash> tuned_;  // tuning bucket -> algorithm
  size_t tunings_ = 0;
};

PlanCache& plan_cache() {
  static PlanCache* c = new PlanCache;  // descriptors live for the process
  return *c;
}

}  // namespace

// Largest power of two (up to 256) that divides the address: cuBLASLt picks kernels that
// assume at most this alignment.
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al) al >>= 1;
  return al;
}

GemmKey make_key(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                 int64_t ldb, int64_t ldc, DType ab, DType cd, const void* A, const void* B, const void* D) {
  GemmKey key{};
  key.ta = ta;
  key.tb = tb;
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = lda;
  key.ldb = ldb;
  key.ldc = ldc;
  key.a_type = key.b_type = cuda_type(ab);
  key.cd_type = cuda_type(cd);
  key.bias_type = key.cd_type;
  key.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  key.align_a = alignment_of(A);
  key.align_b = alignment_of(B);
  key.align_c = alignment_of(D);
  return key;
}

std::string describe(const GemmKey& k) {
  std::ostringstream os;
  os << "GEMM m=" << k.m << " n=" << k.n << " k=" << k.k << " op(A)=" << (k.ta == CUBLAS_OP_T ? "T" : "N")
     << " op(B)=" << (k.tb == CUBLAS_OP_T ? "T" : "N") << " lda=" << k.lda << " ldb=" << k.ldb
     << " ldc=" << k.ldc << " A " << type_name(k.a_type) << " B " << type_name(k.b_type) << " C/D "
     << type_name(k.cd_type) << " epilogue " << int(k.epilogue) << (k.block_scaled ? " VEC128 scales" : "")
     << " alignments " << k.align_a << "/" << k.align_b << "/" << k.align_c;
  return os.str();
}

bool run_plan(const GemmKey& key, const void* A, const void* B, void* D, float alpha, float beta,
              const void* bias, bool optional, const void* C, const float* a_scale, const float* b_scale) {
  return plan_cache().run(key, A, B, D, alpha, beta, bias, optional, C, a_scale, b_scale);
}

bool plan_exists(const GemmKey& key) { return plan_cache().exists(key); }

}  // namespace gemm_detail

int64_t gemm_autotune_tunings() { return int64_t(gemm_detail::plan_cache().tunings()); }

}  // namespace biofm::ops::cuda

namespace biofm::ops {
namespace {

// Table layout (little-endian, this build's struct layouts): the magic line, cuBLASLt's version,
// the GPU's name (length-prefixed), the entry count, then per entry the tuning bucket's GemmKey
// and the cublasLtMatmulAlgo_t chosen for it.
constexpr std::string_view kTuningMagic = "biofm-gemm-tuning-v1\n";

std::string this_gpu() {
  int dev = 0;
  BIOFM_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  BIOFM_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return std::string(prop.name) + " sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
}

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

std::string gemm_tuning_table() {
  using cuda::gemm_detail::plan_cache;
  const auto choices = plan_cache().tuned_choices();
  if (choices.empty()) return {};
  std::string out(kTuningMagic);
  put(out, uint64_t(cublasLtGetVersion()));
  const std::string gpu = this_gpu();
  put(out, uint32_t(gpu.size()));
  out += gpu;
  put(out, uint64_t(choices.size()));
  for (const auto& [key, algo] : choices) {
    put(out, key);
    put(out, algo);
  }
  return out;
}

void clear_gemm_tuning() { cuda::gemm_detail::plan_cache().replace_tuned_choices({}); }

int64_t load_gemm_tuning_table(std::string_view table, std::string* why) {
  using cuda::gemm_detail::GemmKey;
  size_t at = 0;
  auto take = [&](void* dst, size_t n, const char* what) {
    if (table.size() - at < n) fail("GEMM tuning table: truncated in ", what, " (", table.size(), " bytes)");
    std::memcpy(dst, table.data() + at, n);
    at += n;
  };
  if (table.substr(0, kTuningMagic.size()) != kTuningMagic)
    fail("GEMM tuning table: not a biofm GEMM tuning table (bad magic)");
  at = kTuningMagic.size();
  uint64_t version = 0, count = 0;
  uint32_t name_len = 0;
  take(&version, sizeof version, "the cuBLASLt version");
  take(&name_len, sizeof name_len, "the GPU name");
  if (name_len > 1024) fail("GEMM tuning table: GPU name of ", name_len, " bytes");
  std::string gpu(name_len, '\0');
  take(gpu.data(), name_len, "the GPU name");
  take(&count, sizeof count, "the entry count");
  const size_t entry = sizeof(GemmKey) + sizeof(cublasLtMatmulAlgo_t);
  if (count > (table.size() - at) / entry || (table.size() - at) != count * entry)
    fail("GEMM tuning table: ", count, " entries do not fill its ", table.size() - at, " bytes");
  if (version != uint64_t(cublasLtGetVersion()) || gpu != this_gpu()) {
    if (why)
      *why = "tuned with cuBLASLt " + std::to_string(version) + " on " + gpu + ", this is cuBLASLt " +
             std::to_string(cublasLtGetVersion()) + " on " + this_gpu();
    return -1;
  }
  std::vector<std::pair<GemmKey, cublasLtMatmulAlgo_t>> choices(count);
  for (auto& [key, algo] : choices) {
    take(&key, sizeof key, "an entry");
    take(&algo, sizeof algo, "an entry");
  }
  cuda::gemm_detail::plan_cache().replace_tuned_choices(choices);
  return int64_t(count);
}

}  // namespace biofm::ops
