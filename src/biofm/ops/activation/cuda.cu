// GELU (erf and tanh forms) and SwiGLU, CUDA: elementwise, 8 elements per thread step
// (16-byte bf16 / 2×16-byte f32 accesses) when every pointer is 16-byte aligned.
//
// Formulas as the CPU reference (ops/cpu_kernels.cpp): erf by its rational approximation,
// CUDA's accurate tanhf / expf in place of its polynomial ones; the GELU ones in gelu_math.cuh:
//   swiglu(g, u) = silu(g)·u,  d/dg = u·σ(g)(1 + g(1 - σ(g))),  d/du = g·σ(g)
// Outputs may alias inputs element for element: each thread reads all its inputs first.
#include "biofm/ops/activation/gelu_math.cuh"
#include "biofm/ops/activation/op.h"
#include "biofm/ops/cuda_util.cuh"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

using namespace gelu_math;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Grid-stride loop: fn.template run<VEC>(i) for i = 0, VEC, ... below n - n % VEC, then
// fn.template run<1>(i) for the tail. run returns the largest |value| it stored (as stored);
// with amax_bits set, the kernel reduces those into it (non-negative floats order like their
// bits, so an unsigned atomicMax does).
template <int VEC, class Fn>
__global__ void elementwise_kernel(int64_t n, Fn fn, unsigned* amax_bits) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t full = n / VEC;
  float m = 0.0f;
  for (int64_t g = tid; g < full; g += stride) m = fmaxf(m, fn.template run<VEC>(g * VEC));
  if constexpr (VEC > 1) {
    const int64_t i = full * VEC + tid;
    if (i < n) m = fmaxf(m, fn.template run<1>(i));
  }
  if (amax_bits) amax_reduce_into(amax_bits, m);
}

// Largest |v[j]| as stored in T.
template <class T, int V>
__device__ __forceinline__ float stored_amax(const float (&v)[V]) {
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) m = fmaxf(m, stored_abs<T>(v[j]));
  return m;
}

// amax (F32 [1] or undefined): zeroed here, then set by the kernel.
template <class Fn>
void launch_elementwise(int64_t n, bool vec8, const Fn& fn, const Tensor& amax = Tensor()) {
  unsigned* bits = amax_accumulator(amax, "elementwise amax");
  if (n <= 0) return;
  constexpr int kThreads = 256;
  if (vec8)
    elementwise_kernel<8>
        <<<grid_for(n / 8 + 1, kThreads, sm_waves(16)), kThreads, 0, cuda_ctx::stream()>>>(n, fn, bits);
  else
    elementwise_kernel<1><<<grid_for(n, kThreads, sm_waves(16)), kThreads, 0, cuda_ctx::stream()>>>(n, fn, bits);
  BIOFM_CUDA_LAUNCH_CHECK();
}

template <class T, bool TANH>
struct GeluForward {
  T* y;
  const T* x;
  template <int V>
  __device__ __forceinline__ float run(int64_t i) const {
    float v[V];
    load_vec<V>(v, x + i);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = TANH ? gelu_tanh(v[j]) : gelu_erf(v[j]);
    store_vec<V>(y + i, v);
    return stored_amax<T>(v);
  }
};

template <class T, bool TANH>
struct GeluBackward {
  T* dx;
  const T* dout;
  const T* x;
  template <int V>
  __device__ __forceinline__ float run(int64_t i) const {
    float g[V], v[V];
    load_vec<V>(g, dout + i);
    load_vec<V>(v, x + i);
#pragma unroll
    for (int j = 0; j < V; ++j) g[j] *= TANH ? gelu_tanh_grad(v[j]) : gelu_erf_grad(v[j]);
    store_vec<V>(dx + i, g);
    return stored_amax<T>(g);
  }
};

// SwiGLU over out[N, F] with gate/up rows `ld` elements apart (ld = F: separate tensors;
// ld = 2F: one packed [N, 2F] tensor, gate | up per row). A V-chunk never crosses a row
// (F % V == 0 whenever V > 1).
struct RowMap {
  int64_t F, ld;
  __device__ __forceinline__ int64_t operator()(int64_t i) const { return i + (i / F) * (ld - F); }
};

template <class T>
struct SwigluForward {
  T* y;
  const T* gate;
  const T* up;
  RowMap in;
  template <int V>
  __device__ __forceinline__ float run(int64_t i) const {
    float g[V], u[V];
    const int64_t k = in(i);
    load_vec<V>(g, gate + k);
    load_vec<V>(u, up + k);
#pragma unroll
    for (int j = 0; j < V; ++j) g[j] = g[j] * sigmoid(g[j]) * u[j];
    store_vec<V>(y + i, g);
    return stored_amax<T>(g);
  }
};

template <class T>
struct SwigluBackward {
  T* dgate;  // may be null
  T* dup;    // may be null
  const T* dout;
  const T* gate;
  const T* up;
  RowMap in;  // for gate, up, dgate and dup
  template <int V>
  __device__ __forceinline__ float run(int64_t i) const {
    float d[V], g[V], u[V], dg[V], du[V];
    const int64_t k = in(i);
    load_vec<V>(d, dout + i);
    load_vec<V>(g, gate + k);
    load_vec<V>(u, up + k);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float s = sigmoid(g[j]);
      dg[j] = d[j] * u[j] * s * (1.0f + g[j] * (1.0f - s));
      du[j] = d[j] * g[j] * s;
    }
    if (dgate) store_vec<V>(dgate + k, dg);
    if (dup) store_vec<V>(dup + k, du);
    return fmaxf(dgate ? stored_amax<T>(dg) : 0.0f, dup ? stored_amax<T>(du) : 0.0f);
  }
};

}  // namespace

void gelu_forward(Tensor& out, const Tensor& x, GeluKind kind, const Tensor& out_amax) {
  const char* op = "gelu_forward";
  require_float(x, op, "x");
  require_like(out, x, op, "out", "x");
  const bool vec8 = aligned16(x) && aligned16(out);
  dispatch_float(x.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    T* y = static_cast<T*>(out.raw());
    const T* xp = static_cast<const T*>(x.raw());
    if (kind == GeluKind::Tanh)
      launch_elementwise(x.numel(), vec8, GeluForward<T, true>{y, xp}, out_amax);
    else
      launch_elementwise(x.numel(), vec8, GeluForward<T, false>{y, xp}, out_amax);
  });
}

void gelu_backward(Tensor& dx, const Tensor& dout, const Tensor& x, GeluKind kind, const Tensor& dx_amax) {
  const char* op = "gelu_backward";
  require_float(x, op, "x");
  require_like(dout, x, op, "dout", "x");
  require_like(dx, x, op, "dx", "x");
  const bool vec8 = aligned16(x) && aligned16(dout) && aligned16(dx);
  dispatch_float(x.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    T* d = static_cast<T*>(dx.raw());
    const T* g = static_cast<const T*>(dout.raw());
    const T* xp = static_cast<const T*>(x.raw());
    if (kind == GeluKind::Tanh)
      launch_elementwise(x.numel(), vec8, GeluBackward<T, true>{d, g, xp}, dx_amax);
    else
      launch_elementwise(x.numel(), vec8, GeluBackward<T, false>{d, g, xp}, dx_amax);
  });
}

void swiglu_forward(Tensor& out, const Tensor& gate, const Tensor& up) {
  const char* op = "swiglu_forward";
  require_float(gate, op, "gate");
  require_like(up, gate, op, "up", "gate");
  require_like(out, gate, op, "out", "gate");
  const bool vec8 = aligned16(gate) && aligned16(up) && aligned16(out);
  dispatch_float(gate.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    launch_elementwise(
        gate.numel(), vec8,
        SwigluForward<T>{static_cast<T*>(out.raw()), static_cast<const T*>(gate.raw()),
                         static_cast<const T*>(up.raw()), RowMap{gate.numel(), gate.numel()}});
  });
}

void swiglu_backward(Tensor& dgate, Tensor& dup, const Tensor& dout, const Tensor& gate,
                     const Tensor& up) {
  const char* op = "swiglu_backward";
  require_float(gate, op, "gate");
  require_like(up, gate, op, "up", "gate");
  require_like(dout, gate, op, "dout", "gate");
  if (dgate.defined()) require_like(dgate, gate, op, "dgate", "gate");
  if (dup.defined()) require_like(dup, gate, op, "dup", "gate");
  if (!dgate.defined() && !dup.defined()) return;
  const bool vec8 =
      aligned16(gate) && aligned16(up) && aligned16(dout) && aligned16(dgate) && aligned16(dup);
  dispatch_float(gate.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    launch_elementwise(
        gate.numel(), vec8,
        SwigluBackward<T>{dgate.defined() ? static_cast<T*>(dgate.raw()) : nullptr,
                          dup.defined() ? static_cast<T*>(dup.raw()) : nullptr,
                          static_cast<const T*>(dout.raw()), static_cast<const T*>(gate.raw()),
                          static_cast<const T*>(up.raw()), RowMap{gate.numel(), gate.numel()}});
  });
}

namespace {
// F of out[N, F] against gate_up[N, 2F].
int64_t packed_width(const Tensor& out, const Tensor& gate_up, const char* op) {
  const int64_t F = out.dim() ? out.size(-1) : 0;
  if (F == 0 || rows_of(gate_up, 2 * F, op, "gate_up") * F != out.numel() || gate_up.dtype() != out.dtype())
    fail(op, ": gate_up ", gate_up.describe(), " must be [N, 2F] for out/dout ", out.describe());
  return F;
}
}  // namespace

void swiglu_forward_packed(Tensor& out, const Tensor& gate_up, const Tensor& out_amax) {
  const char* op = "swiglu_forward_packed";
  require_float(gate_up, op, "gate_up");
  require_float(out, op, "out");
  const int64_t F = packed_width(out, gate_up, op);
  const bool vec8 = F % 8 == 0 && aligned16(gate_up) && aligned16(out);
  dispatch_float(gate_up.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    const T* g = static_cast<const T*>(gate_up.raw());
    launch_elementwise(out.numel(), vec8, SwigluForward<T>{static_cast<T*>(out.raw()), g, g + F, RowMap{F, 2 * F}},
                       out_amax);
  });
}

void swiglu_backward_packed(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up,
                            const Tensor& dgate_up_amax) {
  const char* op = "swiglu_backward_packed";
  require_float(gate_up, op, "gate_up");
  require_float(dout, op, "dout");
  require_like(dgate_up, gate_up, op, "dgate_up", "gate_up");
  const int64_t F = packed_width(dout, gate_up, op);
  const bool vec8 = F % 8 == 0 && aligned16(gate_up) && aligned16(dout) && aligned16(dgate_up);
  dispatch_float(gate_up.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    const T* g = static_cast<const T*>(gate_up.raw());
    T* dg = static_cast<T*>(dgate_up.raw());
    launch_elementwise(dout.numel(), vec8,
                       SwigluBackward<T>{dg, dg + F, static_cast<const T*>(dout.raw()), g, g + F, RowMap{F, 2 * F}},
                       dgate_up_amax);
  });
}

}  // namespace biofm::ops::cuda
