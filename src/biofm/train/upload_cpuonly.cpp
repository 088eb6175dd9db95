#include "biofm/train/upload.h"

namespace biofm {
Batch upload_batch(const Batch& b, Device device) { return b.to(device); }
}  // namespace biofm
