// range_timer without CUDA: only the clock marks exist (set_enabled(on, gpu=true) cannot happen
// in a CPU-only build: the trainer asks for GPU marks on CUDA devices only).
#include "biofm/core/error.h"
#include "biofm/core/range_timer.h"

namespace biofm::range_timer::detail {

void* create_event() { fail("range_timer: CUDA events in a CPU-only build"); }
void record_event(void*, void*) { fail("range_timer: CUDA events in a CPU-only build"); }
float elapsed_ms(void*, void*) { fail("range_timer: CUDA events in a CPU-only build"); }

}  // namespace biofm::range_timer::detail
