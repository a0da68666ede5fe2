// RAII CUDA memory: buffers that grow and never shrink, for reuse across calls (SIFT and
// LK workspaces, the matcher's descriptor sets, the reconstruction BA's per-step arrays),
// and arrays from the stream-ordered pool (PoolArray). Include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"
#include "io/base/status.h"

namespace tiepoint {

// The Status of a failed cudaMalloc / cudaHostAlloc of `bytes` for `what` (the sticky
// error cleared): kOutOfMemory naming the sizes, else kUnavailable with CUDA's reason.
inline Status CudaAllocationFailure(cudaError_t err, size_t bytes, const char* what, bool pinned) {
  (void)cudaGetLastError();
  if (err == cudaErrorMemoryAllocation) {
    std::string m = std::string("out of ") + (pinned ? "pinned host" : "GPU") + " memory allocating " +
                    std::to_string(bytes >> 20) + " MiB for " + what;
    size_t free_bytes = 0, total_bytes = 0;
    if (!pinned && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      m += " (" + std::to_string(free_bytes >> 20) + " MiB free of " + std::to_string(total_bytes >> 20) + ")";
    }
    (void)cudaGetLastError();
    return Status::OutOfMemory(m);
  }
  return Status::Unavailable(std::string(pinned ? "cudaHostAlloc" : "cudaMalloc") + " for " + what +
                             ": " + cudaGetErrorString(err));
}

template <typename T, bool kPinned>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  ~CudaBuffer() { Free(); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  CudaBuffer(CudaBuffer&& o) noexcept : ptr_(o.ptr_), capacity_(o.capacity_) {
    o.ptr_ = nullptr;
    o.capacity_ = 0;
  }
  // Room for `count` elements; when it must grow, the old contents are lost.
  Status Reserve(size_t count, const char* what = "a buffer") {
    if (count <= capacity_) return Status::Ok();
    Free();
    const size_t bytes = std::max<size_t>(count, 1) * sizeof(T);
    void* p = nullptr;
    const cudaError_t err = kPinned ? cudaHostAlloc(&p, bytes, cudaHostAllocDefault) : cudaMalloc(&p, bytes);
    if (err != cudaSuccess) return CudaAllocationFailure(err, bytes, what, kPinned);
    ptr_ = static_cast<T*>(p);
    capacity_ = count;
    return Status::Ok();
  }
  // Reserve for counts that change from call to call: grows by half again at least, so a
  // run reallocates a few times, not at every new largest count (cudaFree and
  // cudaFreeHost wait for the whole device to go idle).
  Status Grow(size_t count, const char* what = "a buffer") {
    if (count <= capacity_) return Status::Ok();
    return Reserve(std::max(count, capacity_ + capacity_ / 2), what);
  }
  T* get() const { return ptr_; }
  size_t capacity() const { return capacity_; }

 private:
  void Free() {
    if (ptr_ != nullptr) (void)(kPinned ? cudaFreeHost(ptr_) : cudaFree(ptr_));
    ptr_ = nullptr;
    capacity_ = 0;
  }
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

// Device memory (cudaMalloc).
template <typename T>
class DeviceBuffer : public CudaBuffer<T, false> {
 public:
  // Reserve(count), then the host array copied in (large arrays through UploadStaged).
  Status Upload(const T* host, size_t count) {
    TIEPOINT_RETURN_IF_ERROR(this->Reserve(count));
    if (count) TIEPOINT_RETURN_IF_ERROR(UploadStaged(this->get(), host, count * sizeof(T)));
    return Status::Ok();
  }
};

// Pinned host memory (cudaHostAlloc), for asynchronous copies.
template <typename T>
using PinnedBuffer = CudaBuffer<T, true>;

// Device memory from the device's stream-ordered pool (cudaMallocAsync), which keeps freed
// memory mapped (io/base/cuda_device.h, WarmUpCuda), so arrays made and dropped per solve
// or per file cost no mapping after the first: the PCG solver's arrays, the GPU bzip2
// decoder's. Allocated and freed in the order of `stream` (default: the legacy stream).
template <typename T>
class PoolArray {
 public:
  PoolArray() = default;
  ~PoolArray() { if (ptr_) cudaFreeAsync(ptr_, stream_); }
  PoolArray(const PoolArray&) = delete;
  PoolArray& operator=(const PoolArray&) = delete;
  Status Allocate(size_t n, cudaStream_t stream = 0) {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
    ptr_ = nullptr;
    size_ = n;
    stream_ = stream;
    if (n == 0) return Status::Ok();
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), n * sizeof(T), stream));
    return Status::Ok();
  }
  Status Upload(const T* host, size_t n) { return UploadStaged(ptr_, host, n * sizeof(T)); }
  Status Download(T* host, size_t n) const {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(host, ptr_, n * sizeof(T), cudaMemcpyDeviceToHost));
    return Status::Ok();
  }
  T* get() const { return ptr_; }
  size_t size() const { return size_; }
  void Swap(PoolArray& other) {
    std::swap(ptr_, other.ptr_);
    std::swap(size_, other.size_);
    std::swap(stream_, other.stream_);
  }

 private:
  T* ptr_ = nullptr;
  size_t size_ = 0;
  cudaStream_t stream_ = 0;
};

}  // namespace tiepoint
