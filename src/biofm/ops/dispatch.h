// Each op family declares its public functions once, in op.h, with their documentation and
// default arguments, followed by BIOFM_BACKENDS(name, ...), which declares cpu::name (cpu.cpp,
// the readable fp32 reference) and cuda::name (cuda.cu) with the same type (no defaults).
// The public definitions (ops/dispatch.cpp) pick the backend with BIOFM_DISPATCH from the
// device of one tensor argument.
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

// BIOFM_BACKENDS(f, g, ...) (up to 8 names; inside namespace biofm::ops, after the public
// declarations) declares cpu::f, cuda::f, cpu::g, ... as functions of the types of ops::f, ...
#define BIOFM_BACKENDS(...)                                     \
  namespace cpu {                                               \
  BIOFM_FOR_EACH_(BIOFM_DECLARE_LIKE_PUBLIC_, __VA_ARGS__)      \
  }                                                             \
  namespace cuda {                                              \
  BIOFM_FOR_EACH_(BIOFM_DECLARE_LIKE_PUBLIC_, __VA_ARGS__)      \
  }

#define BIOFM_DECLARE_LIKE_PUBLIC_(fn) decltype(::biofm::ops::fn) fn;
#define BIOFM_FOR_EACH_(m, ...) \
  BIOFM_PICK_(__VA_ARGS__, BIOFM_FE8_, BIOFM_FE7_, BIOFM_FE6_, BIOFM_FE5_, BIOFM_FE4_, BIOFM_FE3_, BIOFM_FE2_, BIOFM_FE1_)(m, __VA_ARGS__)
#define BIOFM_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, name, ...) name
#define BIOFM_FE1_(m, a) m(a)
#define BIOFM_FE2_(m, a, ...) m(a) BIOFM_FE1_(m, __VA_ARGS__)
#define BIOFM_FE3_(m, a, ...) m(a) BIOFM_FE2_(m, __VA_ARGS__)
#define BIOFM_FE4_(m, a, ...) m(a) BIOFM_FE3_(m, __VA_ARGS__)
#define BIOFM_FE5_(m, a, ...) m(a) BIOFM_FE4_(m, __VA_ARGS__)
#define BIOFM_FE6_(m, a, ...) m(a) BIOFM_FE5_(m, __VA_ARGS__)
#define BIOFM_FE7_(m, a, ...) m(a) BIOFM_FE6_(m, __VA_ARGS__)
#define BIOFM_FE8_(m, a, ...) m(a) BIOFM_FE7_(m, __VA_ARGS__)
