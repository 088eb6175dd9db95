// How data-parallel training shares the work (distributed.strategy; train/data_parallel.h).
#pragma once

namespace biofm {

enum class ParallelStrategy { Ddp, Zero1, Zero2 };

}  // namespace biofm
