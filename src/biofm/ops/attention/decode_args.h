// Argument checks shared by the CPU and CUDA attention_decode (op.h): shapes, dtypes, device
// and the position bounds, with messages that name the op and the tensor.
#pragma once
#include <cstdint>

#include "biofm/core/error.h"
#include "biofm/core/tensor.h"

namespace biofm::ops::attention_decode_detail {

struct DecodeDims {
  int64_t n_new = 0, Hq = 0, Hkv = 0, D = 0, capacity = 0, group = 1;
  DType dtype = DType::F32;
};

inline void require_on(const Tensor& t, Device dev, const char* op, const char* name) {
  if (!t.defined()) fail(op, ": ", name, " is undefined");
  if (t.device() != dev)
    fail(op, ": ", name, " must be on ", device_name(dev), ", got ", t.describe());
}

inline DecodeDims check_decode_args(const char* op, Device dev, const Tensor& out, const Tensor& q,
                                    const Tensor& k_cache, const Tensor& v_cache, int64_t cache_len,
                                    int64_t q_start_pos) {
  require_on(q, dev, op, "q");
  require_on(k_cache, dev, op, "k_cache");
  require_on(v_cache, dev, op, "v_cache");
  require_on(out, dev, op, "out");
  if (q.dtype() != DType::F32 && q.dtype() != DType::BF16)
    fail(op, ": q must be F32 or BF16, got ", q.describe());
  if (q.dim() != 3) fail(op, ": q must be [n_new, Hq, D], got ", q.describe());
  if (k_cache.dim() != 3) fail(op, ": k_cache must be [capacity, Hkv, D], got ", k_cache.describe());
  DecodeDims d;
  d.dtype = q.dtype();
  d.n_new = q.size(0);
  d.Hq = q.size(1);
  d.D = q.size(2);
  d.capacity = k_cache.size(0);
  d.Hkv = k_cache.size(1);
  if (k_cache.dtype() != d.dtype || k_cache.size(2) != d.D)
    fail(op, ": k_cache ", k_cache.describe(), " does not match q ", q.describe());
  if (v_cache.shape() != k_cache.shape() || v_cache.dtype() != d.dtype)
    fail(op, ": v_cache ", v_cache.describe(), " must match k_cache ", k_cache.describe());
  if (out.shape() != q.shape() || out.dtype() != d.dtype)
    fail(op, ": out ", out.describe(), " must match q ", q.describe());
  if (d.Hkv == 0 || d.Hq % d.Hkv != 0)
    fail(op, ": query heads (", d.Hq, ") must be a multiple of kv heads (", d.Hkv, ")");
  d.group = d.Hq / d.Hkv;
  if (q_start_pos < 0) fail(op, ": q_start_pos must be >= 0, got ", q_start_pos);
  if (q_start_pos + d.n_new > cache_len)
    fail(op, ": queries at positions ", q_start_pos, " .. ", q_start_pos + d.n_new - 1,
         " need cache rows the cache does not hold (cache_len ", cache_len, ")");
  if (cache_len > d.capacity)
    fail(op, ": cache_len ", cache_len, " exceeds the cache capacity ", d.capacity);
  return d;
}

}  // namespace biofm::ops::attention_decode_detail
