// Each op family declares its public functions once (op.h) and implements them per
// backend in namespaces cpu:: (cpu.cpp, the readable fp32 reference) and cuda:: (cuda.cu).
// BIOFM_DISPATCH picks the backend from the device of the op's first tensor argument.
#pragma once
#include "biofm/core/tensor.h"

#ifdef BIOFM_WITH_CUDA
#define BIOFM_DISPATCH(device, fn, ...) \
  ((device) == ::biofm::Device::CPU ? cpu::fn(__VA_ARGS__) : cuda::fn(__VA_ARGS__))
#else
#define BIOFM_DISPATCH(device, fn, ...)                                           \
  ((device) == ::biofm::Device::CPU ? cpu::fn(__VA_ARGS__)                        \
                                    : ::biofm::fail(#fn ": built without CUDA"))
#endif
