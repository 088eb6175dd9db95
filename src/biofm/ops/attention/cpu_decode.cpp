// attention_decode on the CPU (op.h): the new query rows of one sequence against its key/value
// cache, causal. One task per (new row, query head), run in parallel with OpenMP when the
// work is large enough; inside a task the scores of the row's keys go into a per-thread buffer
// (softmax with the vectorised exp of cpu_kernels.cpp), then P·V accumulates in fp32. BF16
// tensors are read and written through fp32 conversions; all arithmetic is fp32.
#include <algorithm>
#include <vector>

#include "biofm/ops/attention/decode_args.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/cpu_util.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;
using attention_decode_detail::DecodeDims;

namespace {

inline float load(float x) { return x; }
inline float load(bf16 x) { return bf16_to_f32(x); }
inline void store(float& dst, float x) { dst = x; }
inline void store(bf16& dst, float x) { dst = f32_to_bf16(x); }

template <class T>
void decode(const DecodeDims& d, const T* Q, const T* K, const T* V, T* O, int64_t p0, float scale) {
  const int64_t n = d.n_new, Hq = d.Hq, Hkv = d.Hkv, D = d.D, group = d.group;
  const int64_t tasks = n * Hq, max_keys = p0 + n;
  const double work = double(tasks) * double(max_keys) * double(D);
  const int threads = work < 262144.0 ? 1 : int(std::max<int64_t>(1, std::min<int64_t>(max_threads(), tasks)));
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> s(static_cast<size_t>(max_keys)), qf(static_cast<size_t>(D)),
        acc(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t i = t / Hq, h = t % Hq, g = h / group;
      const int64_t nk = p0 + i + 1;  // keys 0 .. p0+i
      const T* qi = Q + (i * Hq + h) * D;
      for (int64_t e = 0; e < D; ++e) qf[size_t(e)] = load(qi[e]);
      for (int64_t j = 0; j < nk; ++j) {
        const T* kj = K + (j * Hkv + g) * D;
        float dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += qf[size_t(e)] * load(kj[e]);
        s[size_t(j)] = dot * scale;
      }
      const float mx = max_of(s.data(), nk);
      const float sum = exp_shift_sum(s.data(), nk, mx);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < nk; ++j) {
        const float p = s[size_t(j)];
        const T* vj = V + (j * Hkv + g) * D;
        for (int64_t e = 0; e < D; ++e) acc[size_t(e)] += p * load(vj[e]);
      }
      const float inv = 1.0f / sum;
      T* o = O + (i * Hq + h) * D;
      for (int64_t e = 0; e < D; ++e) store(o[e], acc[size_t(e)] * inv);
    }
  }
}

}  // namespace

void attention_decode(Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      int64_t cache_len, int64_t q_start_pos, float scale) {
  const DecodeDims d = attention_decode_detail::check_decode_args(
      "attention_decode", Device::CPU, out, q, k_cache, v_cache, cache_len, q_start_pos);
  if (d.n_new == 0 || d.Hq == 0 || d.D == 0) return;
  if (d.dtype == DType::F32)
    decode<float>(d, q.f32(), k_cache.f32(), v_cache.f32(), out.f32(), q_start_pos, scale);
  else
    decode<bf16>(d, q.bf(), k_cache.bf(), v_cache.bf(), out.bf(), q_start_pos, scale);
}

}  // namespace biofm::ops::cpu
