// Hooks for NVIDIA Nsight Systems: NVTX ranges around the phases of a train step, and a
// capture window over optimizer steps (cudaProfilerStart/Stop; run nsys with
// --capture-range=cudaProfilerApi). Without CUDA the NVTX calls compile to nothing and the window
// only keeps its count (so it is testable on the CPU). With profiler.range_times the ranges
// opened inside the window are also timed (core/range_timer.h), on any device.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "biofm/core/range_timer.h"

#ifdef BIOFM_WITH_CUDA
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>
#endif

namespace biofm {

// NvtxRange r("forward_backward"); — a named range until the end of the scope.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#ifdef BIOFM_WITH_CUDA
    nvtxRangePushA(name);
#endif
    if (range_timer::recording()) timer_ = range_timer::begin(name);
  }
  // NvtxRange r("layer %d backward", l); — a numbered range (NVTX copies the name). Formats
  // only when there is a use for the name: NVTX (CUDA builds) or the range timer.
  NvtxRange(const char* format, int n) {
    const bool timed = range_timer::recording();
#ifdef BIOFM_WITH_CUDA
    const bool named = true;
#else
    const bool named = timed;
#endif
    if (!named) return;
    char name[64];
    std::snprintf(name, sizeof name, format, n);
#ifdef BIOFM_WITH_CUDA
    nvtxRangePushA(name);
#endif
    if (timed) timer_ = range_timer::begin(name);
  }
  ~NvtxRange() {
    range_timer::end(timer_);
#ifdef BIOFM_WITH_CUDA
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  int timer_ = -1;  // its range_timer id while the window records
};

// The process-wide capture window (cudaProfilerStart/Stop are process-wide too). Steps are
// numbered from 1 as in the logs; configure() says how many ran before (a resumed run).
class ProfilerWindow {
 public:
  static void configure(int64_t start_step, int64_t end_step, int64_t steps_done) {
    state() = {start_step, end_step, steps_done, false};
  }
  // TrainStep::run calls these around each optimizer step.
  static void step_begin() {
    State& s = state();
    ++s.step;
    if (s.start >= 0 && s.step == s.start && !s.capturing) {
      s.capturing = true;
      range_timer::set_window(true);
#ifdef BIOFM_WITH_CUDA
      cudaProfilerStart();
#endif
    }
    if (s.capturing) range_timer::set_recording(true);  // (the step only: not what runs between steps)
  }
  static void step_end() {
    State& s = state();
    range_timer::set_recording(false);
    if (s.capturing && s.step >= s.end) {
      s.capturing = false;
      range_timer::set_window(false);
#ifdef BIOFM_WITH_CUDA
      cudaProfilerStop();
#endif
    }
  }
  static bool capturing() { return state().capturing; }
  static int64_t current_step() { return state().step; }

  // profiler.range_times: the ranges timed over the window and its first and last step, once the
  // window has closed and every range in it has ended; nothing before (or when nothing was
  // timed). close: end the window here (a run that stops inside it).
  struct Timed {
    std::vector<range_timer::Row> rows;
    int64_t first = 0, last = 0;
  };
  static std::optional<Timed> take_timed(bool close = false) {
    if (close) range_timer::set_window(false);
    if (!range_timer::pending()) return std::nullopt;
    const State& s = state();
    return Timed{range_timer::take(), s.start, std::min(s.end, s.step)};
  }

 private:
  struct State {
    int64_t start = -1, end = -1, step = 0;
    bool capturing = false;
  };
  static State& state() {
    static State s;
    return s;
  }
};

}  // namespace biofm
