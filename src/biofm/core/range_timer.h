// Time per named range over the profiler window (profiler.range_times=true): every NvtxRange
// opened while the window captures (core/profiling.h) records its start and end, and so does
// every collective the communicators issue. On the GPU the marks are CUDA events on the stream
// the work runs on (a range's time is its stream time, waits for other streams included); on the
// CPU, where the work is done when the call returns, the steady clock. When the window closes,
// take() sums the times per name: per layer forward and backward, the optimizer, the gradient
// sync's wait, each kind of collective — a per-step profile without Nsight Systems.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace biofm::range_timer {

// On for this process (gpu: mark with CUDA events on the compute stream; else the clock).
// Changing it forgets whatever was recorded and not taken.
void set_enabled(bool on, bool gpu);
// Set by ProfilerWindow: the window is open from its first step's start to its last step's end,
// and ranges are recorded only inside its optimizer steps (validation, checkpoints and logging
// between the steps are not the step's time).
void set_window(bool open);
void set_recording(bool on);
bool recording();

// A range: begin returns an id (-1 when not recording) that end closes. `stream`: a cudaStream_t
// to mark on (nullptr: the compute stream); ignored when marking with the clock.
int begin(const char* name, void* stream = nullptr);
void end(int id, void* stream = nullptr);

struct Row {
  std::string name;
  int64_t calls = 0;
  double total_ms = 0;
};
// Whether a recorded window waits to be taken (the window has closed and its ranges ended).
bool pending();
// Waits for the marked work, sums the closed ranges per name (in the order the names first
// appeared) and forgets them.
std::vector<Row> take();

// Rows whose names differ only in a number ("layer 7 forward") folded into one ("layer * forward"),
// in first-seen order, with the least and most of its members.
struct Group {
  std::string name;
  int64_t calls = 0;
  double total_ms = 0;
  int members = 0;
  std::string least, most;
  double least_ms = 0, most_ms = 0;
};
std::vector<Group> fold(const std::vector<Row>& rows);

// The table printed at the end of a window: per optimizer step (`steps` steps recorded), folded.
std::string format_table(const std::vector<Row>& rows, int64_t steps, const std::string& title);
// The rows as JSON (every name on its own), with the window's steps.
std::string to_json(const std::vector<Row>& rows, int64_t first_step, int64_t last_step, int rank, bool gpu);

namespace detail {
// CUDA builds (range_timer_cuda.cpp): a timing event, recorded on `stream` (nullptr: the compute
// stream), the milliseconds between two (waiting for the second). Events are pooled, not freed.
void* create_event();
void record_event(void* event, void* stream);
float elapsed_ms(void* start, void* end);
}  // namespace detail

}  // namespace biofm::range_timer
