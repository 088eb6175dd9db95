// The MLP's GEMM + exact-GELU fusions on Hopper, through CUTLASS 3's SM90 warp-specialized GEMMs
// with epilogue fusions (CUTLASS is header-only; PyPI's nvidia-cutlass ships the headers).
//
//   forward   pre = x·Wᵀ + b,  act = gelu(pre)      one GEMM writes both (act only: inference)
//   backward  dpre = (dout·W) ⊙ gelu'(pre)           the fc2 input-gradient GEMM reads pre
//
// cuBLASLt's GELU epilogues are the tanh approximation; ESM-2 uses the erf form, so these are
// CUTLASS kernels: its erf GELU for the forward, and our erf derivative (CUTLASS's dGELU is the
// tanh one) for the backward. Every matrix is row-major in biofm; CUTLASS sees the transposed
// (column-major) problem, as cuBLASLt does: M = features, N = tokens, K = the contraction, so
// the bias is a per-row (M) vector and the output's M dimension is contiguous.
//
// They run only on sm_90a (H100/H200; sm90a_device) and where they measured faster than the pair
// below (contraction 1024-2048: ESM-2 650M; kMinFusedK / kMaxFusedK). The fallback (other dtypes, unaligned shapes, contraction
// lengths outside that range, a shape CUTLASS refuses) is the unfused pair:
// cuBLASLt linear_forward / linear_backward + the GELU kernels — the same arithmetic up to
// rounding order (except the forward's erf: CUTLASS's GELU takes CUDA's erff, our GELU kernels
// the rational approximation of activation/gelu_math.cuh), and what the CPU reference computes.
#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>

#include "biofm/core/device_memory.h"
#include "biofm/ops/activation/gelu_math.cuh"
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/options.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

using bf16 = cutlass::bfloat16_t;

// d/dz of the exact GELU, times the incoming gradient: d·gelu_erf'(z) (activation/gelu_math.cuh,
// the formula the elementwise GELU backward uses).
template <class T>
struct GeluErfGrad {
  CUTLASS_HOST_DEVICE T operator()(T const& d, T const& z) const {
    return T(float(d) * gelu_math::gelu_erf_grad(float(z)));
  }
};
template <class T, int N>
struct GeluErfGrad<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& d,
                                                      cutlass::Array<T, N> const& z) const {
    cutlass::Array<T, N> y;
    GeluErfGrad<T> op;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = op(d[i], z[i]);
    return y;
  }
};

using LayoutCol = cutlass::layout::ColumnMajor;
constexpr int kAlign = 8;  // 16 bytes of bf16

// A CUTLASS SM90 GEMM with a fused epilogue, for one tile configuration.
template <class Tile, class Cluster, bool Pingpong, class LayoutA, class FusionOp>
struct FusedGemm {
  using MainloopSchedule = std::conditional_t<Pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                              cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  using EpilogueSchedule =
      std::conditional_t<Pingpong, cutlass::epilogue::TmaWarpSpecialized, cutlass::epilogue::TmaWarpSpecializedCooperative>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      float, float, void, LayoutCol, kAlign, bf16, LayoutCol, kAlign, EpilogueSchedule, FusionOp>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA, kAlign, bf16, LayoutCol, kAlign, float, Tile,
      Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// The three kernels, each in the tile configuration that measured fastest on an H100 for the
// ESM-2 650M MLP (bench/mlp_gelu_bench.cpp; 16k tokens, H 1280, F 5120; five configurations
// compared, docs/PERFORMANCE.md): ping-pong warp-specialised 128×128×64 tiles, so one warp
// group's epilogue (the GELU, two stores) overlaps the other's main loop.
//   forward: A = W [F, H] row-major (M×K, K contiguous), with the pre-activation store
//            (cluster 1×1) and without it (inference; cluster 2×1);
//   backward: A = Wᵀ of W [O, F] row-major, i.e. M×K = F×O with M contiguous (column-major).
using Tile = cute::Shape<cute::_128, cute::_128, cute::_64>;
using Cluster1 = cute::Shape<cute::_1, cute::_1, cute::_1>;
using Cluster2 = cute::Shape<cute::_2, cute::_1, cute::_1>;
using GeluAux = FusedGemm<Tile, Cluster1, true, cutlass::layout::RowMajor,
                          cutlass::epilogue::fusion::LinCombPerRowBiasEltActAux<
                              LayoutCol, cutlass::epilogue::thread::GELU, bf16, float, bf16, bf16>>::Gemm;
using GeluOnly = FusedGemm<Tile, Cluster2, true, cutlass::layout::RowMajor,
                           cutlass::epilogue::fusion::LinCombPerRowBiasEltAct<cutlass::epilogue::thread::GELU, bf16,
                                                                               float, bf16>>::Gemm;
using DGelu = FusedGemm<Tile, Cluster1, true, LayoutCol,
                        cutlass::epilogue::fusion::LinCombDeEltAct<LayoutCol, GeluErfGrad, bf16, float, bf16>>::Gemm;

// Where these kernels measured faster than cuBLASLt's GEMM plus the separate GELU kernel (H100,
// 16k tokens): contraction lengths around ESM-2 650M's 1280 (forward 1.12×/1.20× without pre,
// backward 1.10×). Shorter (150M's 640, 35M's 480: 0.85-0.94×) and longer (3B's 2560 and up:
// 0.7-0.9×) they lose, so the pair stays unfused there.
constexpr int64_t kMinFusedK = 1024, kMaxFusedK = 2048;

// A packed stride of the CUTLASS problem (M, N, K, L = 1): each operand has one unit (static)
// stride and one leading dimension; the batch stride stays 0.
template <class Stride>
Stride packed(int64_t leading) {
  Stride s{};
  auto set = [&](auto&& e) {
    if constexpr (!cute::is_static<std::remove_cvref_t<decltype(e)>>::value) e = leading;
  };
  set(cute::get<0>(s));
  set(cute::get<1>(s));
  return s;
}

// The arguments shared by the three kernels: D[M, N] (column-major, leading dimension M) =
// A·Bᵀ-in-CUTLASS-terms over K, with A's leading dimension lda and B's ldb, no C operand.
template <class Gemm>
typename Gemm::Arguments gemm_args(int64_t M, int64_t N, int64_t K, const void* a, int64_t lda, const void* b,
                                   int64_t ldb, void* d) {
  using K_ = typename Gemm::GemmKernel;
  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {int(M), int(N), int(K), 1};
  args.mainloop.ptr_A = static_cast<const bf16*>(a);
  args.mainloop.dA = packed<typename K_::StrideA>(lda);
  args.mainloop.ptr_B = static_cast<const bf16*>(b);
  args.mainloop.dB = packed<typename K_::StrideB>(ldb);
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = packed<typename K_::StrideC>(M);
  args.epilogue.ptr_D = static_cast<bf16*>(d);
  args.epilogue.dD = packed<typename K_::StrideD>(M);
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  const OpOptions& o = op_options();  // (ranges checked by set_op_options)
  if (o.gemm_fused_swizzle > 0) args.scheduler.max_swizzle_size = o.gemm_fused_swizzle;
  using Raster = decltype(args.scheduler.raster_order);
  if (o.gemm_fused_raster > 0) args.scheduler.raster_order = o.gemm_fused_raster == 1 ? Raster::AlongM : Raster::AlongN;
  BIOFM_CUDA_CHECK(cudaGetDevice(&args.hw_info.device_id));
  args.hw_info.sm_count = cuda_ctx::sm_count();  // (else CUTLASS queries it on every call)
  return args;
}

// Runs a prepared CUTLASS GEMM on the current stream; false when CUTLASS cannot take it.
template <class Gemm>
bool run(typename Gemm::Arguments& args) {
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
  const size_t ws_bytes = Gemm::get_workspace_size(args);
  Tensor ws;
  if (ws_bytes) ws = Tensor::empty({int64_t(ws_bytes)}, DType::U8, Device::CUDA);
  cutlass::Status st = gemm.initialize(args, ws_bytes ? ws.raw() : nullptr, cuda_ctx::stream());
  if (st != cutlass::Status::kSuccess) return false;
  st = gemm.run(cuda_ctx::stream());
  if (st != cutlass::Status::kSuccess) fail("CUTLASS fused GEMM failed to launch: ", cutlassGetStatusString(st));
  BIOFM_CUDA_LAUNCH_CHECK();
  return true;
}

// CUTLASS's SM90 kernels have a body only in sm_90a code; elsewhere they return without writing
// anything (after printing "Arch conditional MMA ... Aborting"), so they may run only where this
// file was compiled for sm_90a (CMake sets BIOFM_CUTLASS_SM90A) and the device is compute
// capability 9.0.
bool sm90a_device() {
#ifdef BIOFM_CUTLASS_SM90A
  static thread_local int device = -1, answer = 0;
  int d = 0;
  BIOFM_CUDA_CHECK(cudaGetDevice(&d));
  if (d != device) {
    device = d;
    answer = cuda_compute_capability() == 90;
  }
  return answer;
#else
  return false;
#endif
}

bool fusable(std::initializer_list<const Tensor*> ts, std::initializer_list<int64_t> dims, int64_t k) {
  if (k < kMinFusedK || k > kMaxFusedK || !op_options().gemm_fused_gelu || !sm90a_device()) return false;
  for (const Tensor* t : ts)
    if (t->defined() && (t->dtype() != DType::BF16 || !aligned16(*t))) return false;
  for (int64_t d : dims)
    if (d % kAlign != 0 || d <= 0 || d > INT32_MAX) return false;
  return true;
}

std::atomic<int64_t> g_fused_calls{0};

}  // namespace

int64_t gemm_gelu_fused_calls() { return g_fused_calls.load(); }

void linear_gelu_forward(Tensor& act, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias) {
  const char* op = "linear_gelu_forward";
  if (w.dim() != 2) fail(op, ": w must be [F, H], got ", w.describe());
  const int64_t F = w.size(0), H = w.size(1);
  const int64_t N = rows_of(x, H, op, "x");
  require_like(act, pre.defined() ? pre : act, op, "act", "pre");
  if (act.numel() != N * F) fail(op, ": act must hold ", N, " x ", F, " values, got ", act.describe());
  if (N > 0 && bias.defined() && bias.numel() == F &&
      fusable({&act, &pre, &x, &w, &bias}, {F, H}, H)) {
    auto launch = [&](auto tag) -> bool {
      using Gemm = typename decltype(tag)::type;
      // W [F, H] row-major is A (M×K, leading dimension H); x [N, H] is B (leading dimension H).
      typename Gemm::Arguments args = gemm_args<Gemm>(F, N, H, w.raw(), H, x.raw(), H, act.raw());
      args.epilogue.thread.bias_ptr = static_cast<const bf16*>(bias.raw());
      if constexpr (requires { args.epilogue.thread.aux_ptr; }) {
        args.epilogue.thread.aux_ptr = static_cast<bf16*>(pre.raw());
        args.epilogue.thread.dAux = packed<decltype(args.epilogue.thread.dAux)>(F);
      }
      return run<Gemm>(args);
    };
    const bool ok = pre.defined() ? launch(std::type_identity<GeluAux>{}) : launch(std::type_identity<GeluOnly>{});
    if (ok) {
      ++g_fused_calls;
      return;
    }
  }
  unfused::linear_gelu_forward(act, pre, x, w, bias);
}

void linear_dgelu_backward(Tensor& dpre, const Tensor& dout, const Tensor& w, const Tensor& pre) {
  const char* op = "linear_dgelu_backward";
  if (w.dim() != 2) fail(op, ": w must be [O, F], got ", w.describe());
  const int64_t O = w.size(0), F = w.size(1);
  const int64_t N = rows_of(dout, O, op, "dout");
  require_like(dpre, pre, op, "dpre", "pre");
  if (pre.numel() != N * F) fail(op, ": pre must hold ", N, " x ", F, " values, got ", pre.describe());
  if (N > 0 && fusable({&dpre, &dout, &w, &pre}, {F, O}, O)) {
    // Wᵀ of W [O, F] row-major is A (M×K = F×O, M contiguous, leading dimension F); dout [N, O] is B.
    typename DGelu::Arguments args = gemm_args<DGelu>(F, N, O, w.raw(), F, dout.raw(), O, dpre.raw());
    args.epilogue.thread.aux_ptr = static_cast<const bf16*>(pre.raw());
    args.epilogue.thread.dAux = packed<decltype(args.epilogue.thread.dAux)>(F);
    if (run<DGelu>(args)) {
      ++g_fused_calls;
      return;
    }
  }
  unfused::linear_dgelu_backward(dpre, dout, w, pre);
}

}  // namespace biofm::ops::cuda
