// Token embedding lookup and ESM-2 token dropout, CUDA.
//
// Row kernels (lookup, row scaling) give each row a group of threads that walks it in chunks of
// VEC elements (16-byte accesses when C % 8 == 0 and the pointers are aligned).
//
// Embedding backward (dtable[id[n]] += dout[n]) avoids one global atomic per element: the
// vocabularies here are tiny (33 or 256) and a batch repeats a handful of ids thousands of
// times, so global atomics would serialise on a few addresses. Instead each block takes a tile
// of columns × a chunk of rows, maps the distinct ids of its chunk to compact slots in shared
// memory (first come, first served; at most kSlots of them), and accumulates each row into its
// slot's shared accumulator. Every thread owns its columns of every slot, so these adds need
// no atomics. At the end the block adds its used slots to dtable with one global atomic per
// (slot, column). Ids beyond the slot budget (a chunk with more distinct ids than kSlots) go
// straight to global atomics; so does everything for vocabularies too large for the slot map.
//
// Ids outside [0, V) cannot throw from the GPU without a host synchronisation: the lookup
// writes NaN rows for them (so the loss shows it) and the backward skips them.
#include <algorithm>
#include <bit>
#include <cmath>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/embedding/op.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

// Threads per row and rows per 256-thread block. The threads per row are a power of two in
// [32, 256], so that they divide the block: every thread belongs to one of its rpb rows. (A
// count that did not divide 256, e.g. 160 for 1280 features in chunks of 8, left threads in a
// partial group that worked on the next block's first row as well; in the in-place row scaling
// of the token dropout two blocks then multiplied the same elements at once, a race that scaled
// some of them twice. ESM-2 150M and 650M hit it.)
struct RowGroups {
  int tpr, rpb;
};
RowGroups row_groups(int64_t chunks_per_row) {
  const int tpr = int(std::min<uint64_t>(256, std::max<uint64_t>(32, std::bit_ceil(uint64_t(chunks_per_row)))));
  return {tpr, 256 / tpr};
}

// ---------------------------------------------------------------------------------------
// Lookup.

template <class T, class Tab, int VEC>
__global__ void embedding_forward_kernel(T* out, const int32_t* ids, const Tab* table, int64_t N,
                                         int64_t C, int64_t V, int tpr) {
  const int rpb = blockDim.x / tpr;
  const int g = threadIdx.x / tpr, t = threadIdx.x % tpr;
  const int64_t chunks = C / VEC;
  for (int64_t n = int64_t(blockIdx.x) * rpb + g; n < N; n += int64_t(gridDim.x) * rpb) {
    const int32_t id = ids[n];
    const bool ok = id >= 0 && id < V;
    const Tab* src = table + (ok ? int64_t(id) : 0) * C;
    T* dst = out + n * C;
    for (int64_t ch = t; ch < chunks; ch += tpr) {
      float v[VEC];
      if (ok) {
        load_vec<VEC>(v, src + ch * VEC);
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[i] = NAN;
      }
      store_vec<VEC>(dst + ch * VEC, v);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Backward.

constexpr int kSlots = 36;  // distinct ids per block with a shared accumulator
constexpr int kBwdThreads = 128;
constexpr int kMaxSlotMapV = 2048;  // larger vocabularies: plain global atomics
constexpr int kOverflow = -4, kClaimed = -3, kUnseen = -1;

// Grid (column tiles, row chunks). Tile = kBwdThreads·CV columns. Dynamic shared memory:
// kSlots·tile floats of accumulators, then V ints of slot map.
template <class T, int CV>
__global__ void __launch_bounds__(kBwdThreads)
    embedding_backward_slots_kernel(float* dtable, const T* dout, const int32_t* ids, int64_t N,
                                    int64_t C, int V, int64_t rows_per_chunk) {
  constexpr int kTile = kBwdThreads * CV;
  extern __shared__ float acc[];  // [kSlots][CV][kBwdThreads]: conflict-free per-thread columns
  int* slot_of = reinterpret_cast<int*>(acc + kSlots * kTile);  // [V]
  __shared__ int slot_vocab[kSlots];
  __shared__ int nslots;

  const int t = threadIdx.x;
  const int64_t col = int64_t(blockIdx.x) * kTile + int64_t(t) * CV;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;

  for (int v = t; v < V; v += kBwdThreads) slot_of[v] = kUnseen;
  if (t == 0) nslots = 0;
  __syncthreads();
  // Phase 1: give each distinct id of the chunk a slot.
  for (int64_t r = r0 + t; r < r1; r += kBwdThreads) {
    const int32_t id = ids[r];
    if (id < 0 || id >= V) continue;
    if (atomicCAS(&slot_of[id], kUnseen, kClaimed) == kUnseen) {
      const int s = atomicAdd(&nslots, 1);
      if (s < kSlots) {
        slot_of[id] = s;
        slot_vocab[s] = id;
      } else {
        slot_of[id] = kOverflow;
      }
    }
  }
  __syncthreads();
  const int used = nslots < kSlots ? nslots : kSlots;
  for (int i = t; i < used * kTile; i += kBwdThreads) acc[i] = 0.0f;
  __syncthreads();

  // Phase 2: accumulate rows; thread t owns columns [t·CV, t·CV + CV) of every slot.
  if (col < C) {
    float* mine = acc + t;  // element i of this thread's columns at mine[s·kTile + i·kBwdThreads]
    int64_t r = r0;
    constexpr int U = 8;  // rows in flight per thread
    for (; r + U <= r1; r += U) {
      float v[U][CV];
      int32_t id[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        id[u] = ids[r + u];
        load_vec<CV>(v[u], dout + (r + u) * C + col);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (id[u] < 0 || id[u] >= V) continue;
        const int s = slot_of[id[u]];
        if (s >= 0) {
#pragma unroll
          for (int i = 0; i < CV; ++i) mine[s * kTile + i * kBwdThreads] += v[u][i];
        } else {
#pragma unroll
          for (int i = 0; i < CV; ++i) atomicAdd(dtable + int64_t(id[u]) * C + col + i, v[u][i]);
        }
      }
    }
    for (; r < r1; ++r) {
      const int32_t id = ids[r];
      if (id < 0 || id >= V) continue;
      float v[CV];
      load_vec<CV>(v, dout + r * C + col);
      const int s = slot_of[id];
      if (s >= 0) {
#pragma unroll
        for (int i = 0; i < CV; ++i) mine[s * kTile + i * kBwdThreads] += v[i];
      } else {
#pragma unroll
        for (int i = 0; i < CV; ++i) atomicAdd(dtable + int64_t(id) * C + col + i, v[i]);
      }
    }
    // Phase 3: flush this thread's columns of every used slot (its own data: no barrier).
    for (int s = 0; s < used; ++s) {
      float* dst = dtable + int64_t(slot_vocab[s]) * C + col;
#pragma unroll
      for (int i = 0; i < CV; ++i) atomicAdd(dst + i, mine[s * kTile + i * kBwdThreads]);
    }
  }
}

// Fallback for large vocabularies: one global atomic per element.
template <class T>
__global__ void embedding_backward_atomic_kernel(float* dtable, const T* dout, const int32_t* ids,
                                                 int64_t N, int64_t C, int64_t V) {
  const int64_t total = N * C;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i - n * C;
    const int32_t id = ids[n];
    if (id >= 0 && id < V) atomicAdd(dtable + int64_t(id) * C + c, to_f32(dout[i]));
  }
}

// ---------------------------------------------------------------------------------------
// Token dropout.

// Block s < B: sequence s (mask count, then the factor of every row of its slot [cu[s], cu[s+1])).
// Block B: rows [cu[B], N), padding. All indices are clamped to [0, N].
__global__ void token_dropout_scale_kernel(float* scale, const int32_t* ids, const int32_t* cu,
                                           const int32_t* lens, int B, int64_t N, int32_t mask_id) {
  __shared__ int warp_counts[32];
  const int s = blockIdx.x;
  auto clamp_n = [N](int64_t i) { return i < 0 ? int64_t(0) : (i > N ? N : i); };
  if (s == B) {
    for (int64_t i = clamp_n(cu[B]) + threadIdx.x; i < N; i += blockDim.x) scale[i] = 0.0f;
    return;
  }
  const int64_t start = clamp_n(cu[s]), slot_end = clamp_n(cu[s + 1]);
  const int64_t L = lens[s];
  int64_t end = clamp_n(start + (L > 0 ? L : 0));
  if (end > slot_end) end = slot_end;
  int n_mask = 0;
  if (mask_id >= 0)
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) n_mask += ids[i] == mask_id;
  // Block sum of n_mask.
  for (int o = 16; o > 0; o >>= 1) n_mask += __shfl_xor_sync(0xffffffffu, n_mask, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) warp_counts[warp] = n_mask;
  __syncthreads();
  int total = 0;
  for (int w = 0; w < nw; ++w) total += warp_counts[w];
  // As the CPU reference: (1 - 0.15·0.8) / (1 - n_mask / L) in double, then rounded to fp32.
  const double train_ratio = 0.15 * 0.8;
  const float f =
      mask_id < 0 ? 1.0f : float((1.0 - train_ratio) / (1.0 - double(total) / double(L)));
  for (int64_t i = start + threadIdx.x; i < slot_end; i += blockDim.x) {
    float v = 0.0f;
    if (i < end) v = (mask_id >= 0 && ids[i] == mask_id) ? 0.0f : f;
    scale[i] = v;
  }
}

// x[n, :] *= scale[n]. ZERO_ROWS: rows with scale 0 are set to 0 (clearing NaN / inf too).
template <class T, int VEC, bool ZERO_ROWS>
__global__ void scale_rows_kernel(T* x, const float* scale, int64_t N, int64_t C, int tpr) {
  const int rpb = blockDim.x / tpr;
  const int g = threadIdx.x / tpr, t = threadIdx.x % tpr;
  const int64_t chunks = C / VEC;
  for (int64_t n = int64_t(blockIdx.x) * rpb + g; n < N; n += int64_t(gridDim.x) * rpb) {
    const float f = scale[n];
    T* row = x + n * C;
    for (int64_t ch = t; ch < chunks; ch += tpr) {
      float v[VEC];
      if (ZERO_ROWS && f == 0.0f) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[i] = 0.0f;
      } else {
        load_vec<VEC>(v, row + ch * VEC);
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[i] *= f;
      }
      store_vec<VEC>(row + ch * VEC, v);
    }
  }
}

template <bool ZERO_ROWS>
void launch_scale_rows(Tensor& x, const Tensor& scale, int64_t N, int64_t C, const char* op) {
  if (N == 0 || C == 0) return;
  const bool vec8 = C % 8 == 0 && aligned16(x);
  dispatch_float(x.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    const int vec = vec8 ? 8 : 1;
    const RowGroups rg = row_groups(C / vec);
    const unsigned grid = grid_for(N, rg.rpb, sm_waves(16));
    if (vec8)
      scale_rows_kernel<T, 8, ZERO_ROWS><<<grid, 256, 0, cuda_ctx::stream()>>>(
          static_cast<T*>(x.raw()), scale.f32(), N, C, rg.tpr);
    else
      scale_rows_kernel<T, 1, ZERO_ROWS><<<grid, 256, 0, cuda_ctx::stream()>>>(
          static_cast<T*>(x.raw()), scale.f32(), N, C, rg.tpr);
    BIOFM_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table) {
  const char* op = "embedding_forward";
  require_dtype(ids, DType::I32, op, "ids");
  require_float(table, op, "table");
  require_float(out, op, "out");
  if (table.dim() != 2) fail(op, ": table must be [V, C], got ", table.describe());
  if (ids.dim() != 1) fail(op, ": ids must be [N], got ", ids.describe());
  const int64_t V = table.size(0), C = table.size(1), N = ids.numel();
  if (rows_of(out, C, op, "out") != N)
    fail(op, ": out ", out.describe(), " does not match ids ", ids.describe(), " and table ",
         table.describe());
  if (N == 0 || C == 0) return;
  const bool vec8 = C % 8 == 0 && aligned16(out) && aligned16(table);
  dispatch_float(out.dtype(), op, [&](auto ot) {
    using T = typename decltype(ot)::type;
    dispatch_float(table.dtype(), op, [&](auto tt) {
      using Tab = typename decltype(tt)::type;
      const RowGroups rg = row_groups(vec8 ? C / 8 : C);
      const unsigned grid = grid_for(N, rg.rpb, sm_waves(16));
      if (vec8)
        embedding_forward_kernel<T, Tab, 8><<<grid, 256, 0, cuda_ctx::stream()>>>(
            static_cast<T*>(out.raw()), ids.i32(), static_cast<const Tab*>(table.raw()), N, C, V,
            rg.tpr);
      else
        embedding_forward_kernel<T, Tab, 1><<<grid, 256, 0, cuda_ctx::stream()>>>(
            static_cast<T*>(out.raw()), ids.i32(), static_cast<const Tab*>(table.raw()), N, C, V,
            rg.tpr);
      BIOFM_CUDA_LAUNCH_CHECK();
    });
  });
}

void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  const char* op = "embedding_backward";
  require_dtype(dtable, DType::F32, op, "dtable");
  require_float(dout, op, "dout");
  require_dtype(ids, DType::I32, op, "ids");
  if (dtable.dim() != 2) fail(op, ": dtable must be [V, C], got ", dtable.describe());
  if (ids.dim() != 1) fail(op, ": ids must be [N], got ", ids.describe());
  const int64_t V = dtable.size(0), C = dtable.size(1), N = ids.numel();
  if (rows_of(dout, C, op, "dout") != N)
    fail(op, ": dout ", dout.describe(), " does not match ids ", ids.describe(), " and dtable ",
         dtable.describe());
  if (N == 0 || C == 0 || V == 0) return;
  cudaStream_t stream = cuda_ctx::stream();
  dispatch_float(dout.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    const T* g = static_cast<const T*>(dout.raw());
    if (V > kMaxSlotMapV) {
      embedding_backward_atomic_kernel<T>
          <<<grid_for(N * C, 256, sm_waves(16)), 256, 0, stream>>>(dtable.f32(), g, ids.i32(), N, C, V);
      BIOFM_CUDA_LAUNCH_CHECK();
      return;
    }
    // Two columns per thread where the pointers allow (8-byte f32 / 4-byte bf16 accesses).
    const bool cv2 = C % 2 == 0 && reinterpret_cast<uintptr_t>(g) % (2 * sizeof(T)) == 0;
    const int cv = cv2 ? 2 : 1;
    const int64_t tile = int64_t(kBwdThreads) * cv;
    const int64_t tiles = ceil_div(C, tile);
    // Row chunks: about 4 blocks per SM in all, but at least 64 rows per chunk so that the
    // flush (one atomic per used slot and column) stays small next to the rows it sums.
    const int64_t want = std::max<int64_t>(1, int64_t(cuda_ctx::sm_count()) * 4 / tiles);
    const int64_t chunks = std::max<int64_t>(1, std::min(want, ceil_div(N, 64)));
    const int64_t rows_per_chunk = ceil_div(N, chunks);
    const dim3 grid(unsigned(tiles), unsigned(ceil_div(N, rows_per_chunk)));
    const size_t shm = size_t(kSlots) * size_t(tile) * sizeof(float) + size_t(V) * sizeof(int);
    if (cv2)
      embedding_backward_slots_kernel<T, 2><<<grid, kBwdThreads, shm, stream>>>(
          dtable.f32(), g, ids.i32(), N, C, int(V), rows_per_chunk);
    else
      embedding_backward_slots_kernel<T, 1><<<grid, kBwdThreads, shm, stream>>>(
          dtable.f32(), g, ids.i32(), N, C, int(V), rows_per_chunk);
    BIOFM_CUDA_LAUNCH_CHECK();
  });
}

void esm_token_dropout_forward(Tensor& h, Tensor& scale_out, const Tensor& ids,
                               const Tensor& cu_seqlens, const Tensor& seq_lens, int32_t mask_id) {
  const char* op = "esm_token_dropout_forward";
  require_float(h, op, "h");
  require_dtype(ids, DType::I32, op, "ids");
  require_dtype(scale_out, DType::F32, op, "scale_out");
  require_dtype(cu_seqlens, DType::I32, op, "cu_seqlens");
  require_dtype(seq_lens, DType::I32, op, "seq_lens");
  if (h.dim() != 2) fail(op, ": h must be [N, C], got ", h.describe());
  const int64_t N = h.size(0), C = h.size(1);
  require_shape(ids, {N}, op, "ids");
  require_shape(scale_out, {N}, op, "scale_out");
  if (cu_seqlens.dim() != 1 || seq_lens.dim() != 1 || cu_seqlens.numel() != seq_lens.numel() + 1)
    fail(op, ": cu_seqlens must be [B+1] and seq_lens [B], got ", cu_seqlens.describe(), " and ",
         seq_lens.describe());
  const int64_t B = seq_lens.numel();
  if (N == 0) return;
  // The contents of cu_seqlens / seq_lens live on the GPU and are not validated here (that
  // would need a synchronisation); the kernel clamps every index to [0, N).
  token_dropout_scale_kernel<<<unsigned(B + 1), 256, 0, cuda_ctx::stream()>>>(
      scale_out.f32(), ids.i32(), cu_seqlens.i32(), seq_lens.i32(), int(B), N, mask_id);
  BIOFM_CUDA_LAUNCH_CHECK();
  launch_scale_rows<true>(h, scale_out, N, C, op);
}

void scale_rows_inplace(Tensor& dh, const Tensor& scale) {
  const char* op = "scale_rows_inplace";
  require_float(dh, op, "dh");
  require_dtype(scale, DType::F32, op, "scale");
  if (dh.dim() < 1) fail(op, ": dh must be [N, C], got ", dh.describe());
  const int64_t N = dh.size(0);
  require_shape(scale, {N}, op, "scale");
  const int64_t C = N ? dh.numel() / N : 0;
  launch_scale_rows<false>(dh, scale, N, C, op);
}

}  // namespace biofm::ops::cuda
