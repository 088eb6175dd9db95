#include "biofm/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "biofm/core/device_memory.h"

namespace biofm {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Storage::Storage(size_t nbytes, Device dev, bool pin) : bytes(nbytes), device(dev), pinned(pin) {
  size_t alloc = nbytes ? nbytes : 1;
  if (pinned) {
    if (dev != Device::CPU) fail("pinned memory is host memory");
    ptr = host_alloc_pinned(alloc);
  } else if (dev == Device::CPU) {
    ptr = std::aligned_alloc(64, (alloc + 63) / 64 * 64);
    if (!ptr) fail("out of host memory allocating ", nbytes, " bytes");
  } else {
    ptr = device_alloc(alloc);
  }
}

Storage::~Storage() {
  if (!owned) return;
  if (pinned)
    host_free_pinned(ptr);
  else if (device == Device::CPU)
    std::free(ptr);
  else
    device_free(ptr, bytes ? bytes : 1);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) fail("negative dimension in shape ", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device);
  return t;
}

Tensor Tensor::pinned(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) fail("negative dimension in shape ", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), Device::CPU, /*pinned=*/true);
  return t;
}

Tensor Tensor::borrowed(void* ptr, const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) fail("negative dimension in shape ", shape_str(shape));
  if (!ptr) fail("Tensor::borrowed: null pointer");
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(ptr, t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::from_f32(const Shape& shape, const std::vector<float>& values) {
  Tensor t = empty(shape, DType::F32);
  BIOFM_CHECK(int64_t(values.size()) == t.numel(), "from_f32 size mismatch");
  std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_i32(const Shape& shape, const std::vector<int32_t>& values) {
  Tensor t = empty(shape, DType::I32);
  BIOFM_CHECK(int64_t(values.size()) == t.numel(), "from_i32 size mismatch");
  std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

int64_t Tensor::size(int64_t i) const {
  int64_t d = dim();
  if (i < 0) i += d;
  if (i < 0 || i >= d) fail("dimension ", i, " out of range for ", describe());
  return shape_[size_t(i)];
}

void Tensor::check_type(size_t elem) const {
  if (elem != dtype_size(dtype_)) fail("tensor ", describe(), " accessed with element size ", elem);
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) fail("view ", shape_str(shape), ": more than one -1");
      infer = int64_t(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) s[size_t(infer)] = known ? numel() / known : 0;
  if (shape_numel(s) != numel()) fail("cannot view ", describe(), " as ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::narrow0(int64_t start, int64_t len) const {
  if (dim() < 1 || start < 0 || len < 0 || start + len > shape_[0])
    fail("narrow0(", start, ", ", len, ") out of range for ", describe());
  Tensor t = *this;
  int64_t row = shape_numel(shape_) / (shape_[0] ? shape_[0] : 1);
  t.offset_ += size_t(start * row) * dtype_size(dtype_);
  t.shape_[0] = len;
  return t;
}

Tensor Tensor::flat_slice(int64_t start, const Shape& shape) const {
  int64_t n = shape_numel(shape);
  if (start < 0 || start + n > numel())
    fail("flat_slice(", start, ", ", shape_str(shape), ") out of range for ", describe());
  Tensor t = *this;
  t.offset_ += size_t(start) * dtype_size(dtype_);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  if (device_ != Device::CPU) fail("dtype conversion of ", describe(), " must happen on the CPU");
  Tensor t = empty(shape_, dtype, device_);
  int64_t n = numel();
  if (dtype_ == DType::F32 && dtype == DType::BF16) {
    const float* s = f32();
    bf16* d = t.bf();
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
  } else if (dtype_ == DType::BF16 && dtype == DType::F32) {
    const bf16* s = bf();
    float* d = t.f32();
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
  } else if (dtype_ == DType::I64 && dtype == DType::I32) {
    const int64_t* s = i64();
    int32_t* d = t.i32();
    for (int64_t i = 0; i < n; ++i) d[i] = int32_t(s[i]);
  } else if (dtype_ == DType::I32 && dtype == DType::I64) {
    const int32_t* s = i32();
    int64_t* d = t.i64();
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    fail("no conversion from ", dtype_name(dtype_), " to ", dtype_name(dtype));
  }
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  if (src.numel() != numel() || src.dtype() != dtype_)
    fail("copy_from: ", src.describe(), " into ", describe());
  if (device_ == Device::CPU && src.device_ == Device::CPU)
    std::memcpy(raw(), src.raw(), nbytes());
  else
    device_copy(raw(), device_, src.raw(), src.device_, nbytes());
}

void Tensor::copy_from_async(const Tensor& src) {
  if (src.numel() != numel() || src.dtype() != dtype_)
    fail("copy_from_async: ", src.describe(), " into ", describe());
  device_copy_async(raw(), device_, src.raw(), src.device_, nbytes());
}

void Tensor::zero_() {
  if (device_ == Device::CPU)
    std::memset(raw(), 0, nbytes());
  else
    device_memset_zero(raw(), nbytes());
}

void Tensor::fill_(float value) {
  if (device_ != Device::CPU) {
    Tensor h = empty(shape_, dtype_);
    h.fill_(value);
    copy_from(h);
    return;
  }
  float* p = f32();
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " " + device_name(device_);
}

void check_shape(const Tensor& t, const Shape& expect, const char* what) {
  if (!t.defined()) fail(what, ": tensor is undefined, expected shape ", shape_str(expect));
  if (t.shape() != expect) fail(what, ": expected shape ", shape_str(expect), ", got ", t.describe());
}

}  // namespace biofm
