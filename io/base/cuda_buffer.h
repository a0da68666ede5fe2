// RAII CUDA memory that grows and never shrinks, for buffers reused across calls (LK
// pyramids, the reconstruction BA's per-step arrays). Include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"
#include "io/base/status.h"

namespace tiepoint {

// Device memory (cudaMalloc). Reserve keeps the contents only when it need not grow.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  Status Reserve(size_t count) {
    if (count <= capacity_) return Status::Ok();
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
    capacity_ = count;
    return Status::Ok();
  }
  // Reserve(count), then the host array copied in (large arrays through UploadStaged).
  Status Upload(const T* host, size_t count) {
    TIEPOINT_RETURN_IF_ERROR(Reserve(count));
    if (count) TIEPOINT_RETURN_IF_ERROR(UploadStaged(ptr_, host, count * sizeof(T)));
    return Status::Ok();
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

// Pinned host memory (cudaMallocHost), for asynchronous copies.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  Status Reserve(size_t count) {
    if (count <= capacity_) return Status::Ok();
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
    capacity_ = count;
    return Status::Ok();
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace tiepoint
