// Element types and bf16 conversion (round to nearest even, like PyTorch).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace biofm {

enum class DType : uint8_t { F32, BF16, I32, I64, U8 };
enum class Device : uint8_t { CPU, CUDA };

size_t dtype_size(DType t);
const char* dtype_name(DType t);          // "F32", "BF16", ... as safetensors spells them
DType dtype_from_name(const std::string& s);  // throws on an unknown name
const char* device_name(Device d);

using bf16 = uint16_t;  // storage only on the CPU; arithmetic happens in f32

inline float bf16_to_f32(bf16 h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline bf16 f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return bf16(0x7fc0);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bf16(bits >> 16);
}

}  // namespace biofm
