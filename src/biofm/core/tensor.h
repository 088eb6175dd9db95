// Tensor: a typed, shaped, contiguous view of device or host memory.
//
// Storage is reference counted; views (reshape, slicing along the first dimension,
// sub-ranges of a flat buffer) share it. There is no autograd: ops take explicit
// output tensors, and models keep what backward needs.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "biofm/core/dtype.h"
#include "biofm/core/error.h"

namespace biofm {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

// Owns one allocation; frees it through the allocator of its device (or, for memory another
// library allocated, Tensor::borrowed: not at all).
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device = Device::CPU;
  bool pinned = false;  // page-locked host memory (Tensor::pinned)
  bool owned = true;    // false: Tensor::borrowed, its owner frees it
  Storage(size_t bytes, Device device, bool pinned = false);
  Storage(void* ptr, size_t bytes, Device device) : ptr(ptr), bytes(bytes), device(device), owned(false) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::CPU);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::CPU);
  // A CPU tensor in page-locked host memory, for asynchronous copies to and from the GPU
  // (copy_from_async). Needs the CUDA backend.
  static Tensor pinned(const Shape& shape, DType dtype);
  // A tensor over memory someone else allocated and frees (e.g. NCCL's registered buffers);
  // the caller keeps it alive while any tensor over it exists.
  static Tensor borrowed(void* ptr, const Shape& shape, DType dtype, Device device);
  // Copies host data into a new CPU tensor.
  static Tensor from_f32(const Shape& shape, const std::vector<float>& values);
  static Tensor from_i32(const Shape& shape, const std::vector<int32_t>& values);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return int64_t(shape_.size()); }
  int64_t size(int64_t i) const;  // negative i counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }

  void* raw() const { return static_cast<char*>(storage_->ptr) + offset_; }
  template <class T>
  T* data() const {
    check_type(sizeof(T));
    return static_cast<T*>(raw());
  }
  float* f32() const { return data_as<float>(DType::F32); }
  int32_t* i32() const { return data_as<int32_t>(DType::I32); }
  int64_t* i64() const { return data_as<int64_t>(DType::I64); }
  bf16* bf() const { return data_as<bf16>(DType::BF16); }

  // Same storage, new shape with the same element count (one -1 is inferred).
  Tensor view(const Shape& shape) const;
  // Rows [start, start+len) of the first dimension; shares storage.
  Tensor narrow0(int64_t start, int64_t len) const;
  // Elements [start, start+count) of the flattened tensor, viewed with `shape`.
  Tensor flat_slice(int64_t start, const Shape& shape) const;

  Tensor to(Device device) const;  // copy (or self if already there)
  Tensor to(DType dtype) const;    // CPU conversion between F32 and BF16 (or self)
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same numel and dtype; any devices
  // The same queued on the compute stream without waiting: a copy to the host is complete only
  // after device_synchronize() (core/device_memory.h). For pinned host memory.
  void copy_from_async(const Tensor& src);
  void zero_();
  void fill_(float value);  // F32 only

  std::string describe() const;  // e.g. "F32[4, 8] cpu"

 private:
  template <class T>
  T* data_as(DType t) const {
    if (dtype_ != t) fail("tensor ", describe(), " accessed as ", dtype_name(t));
    return static_cast<T*>(raw());
  }
  void check_type(size_t elem) const;

  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
};

// Throws a message naming `what` when the tensor's shape differs from `expect`.
void check_shape(const Tensor& t, const Shape& expect, const char* what);

}  // namespace biofm
