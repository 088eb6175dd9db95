// Rotary position embedding (rotate-half form), CPU.
#include <cmath>
#include <vector>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/rope/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) {
  const char* op = "rope_apply";
  require_f32(x, op, "x");
  require_i32(positions, op, "positions");
  require_f32(inv_freq, op, "inv_freq");
  if (x.dim() != 3) fail(op, ": x must be [N, H, D], got ", x.describe());
  const int64_t N = x.size(0), H = x.size(1), D = x.size(2);
  if (D % 2 != 0) fail(op, ": head dimension must be even, got ", x.describe());
  const int64_t half = D / 2;
  check_shape(positions, {N}, "rope_apply: positions");
  check_shape(inv_freq, {half}, "rope_apply: inv_freq");
  const int32_t* pos = positions.i32();
  const float* f = inv_freq.f32();
  float* xp = x.f32();
  const float sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel num_threads(threads_for(N * H * D))
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      // The angle is formed in fp32 as Hugging Face does (position · inv_freq), then cos/sin.
      for (int64_t i = 0; i < half; ++i) {
        const float a = float(pos[n]) * f[i];
        cs[size_t(i)] = float(std::cos(double(a)));
        sn[size_t(i)] = sgn * float(std::sin(double(a)));
      }
      for (int64_t h = 0; h < H; ++h) {
        float* v = xp + (n * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * cs[size_t(i)] - x2 * sn[size_t(i)];
          v[i + half] = x2 * cs[size_t(i)] + x1 * sn[size_t(i)];
        }
      }
    }
  }
}

}  // namespace biofm::ops::cpu
