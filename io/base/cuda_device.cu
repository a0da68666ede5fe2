#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"
#include "io/base/parallel_copy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace tiepoint {
namespace {

constexpr size_t kStageBytes = size_t{32} << 20;

// UploadStaged's pinned buffers, stream and events: made once per process (under `mutex`,
// which also serialises the uploads that use them).
struct Staging {
  std::mutex mutex;
  bool ready = false;
  char* buffer[2] = {nullptr, nullptr};
  cudaStream_t stream = nullptr;
  cudaEvent_t done[2] = {nullptr, nullptr};
};

Staging& TheStaging() {
  static Staging* staging = new Staging();  // never destroyed: usable until exit
  return *staging;
}

// With staging.mutex held.
Status PrepareStaging(Staging& st) {
  if (st.ready) return Status::Ok();
  for (int k = 0; k < 2; ++k) {
    if (st.buffer[k] == nullptr) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&st.buffer[k]), kStageBytes, cudaHostAllocDefault));
    }
    if (st.done[k] == nullptr) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&st.done[k], cudaEventDisableTiming));
    }
  }
  if (st.stream == nullptr) TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
  st.ready = true;
  return Status::Ok();
}

}  // namespace

bool CudaBuilt() { return true; }

Status UploadStaged(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes < (size_t{8} << 20)) {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  Staging& st = TheStaging();
  std::lock_guard<std::mutex> lock(st.mutex);
  const auto t0 = std::chrono::steady_clock::now();
  TIEPOINT_RETURN_IF_ERROR(PrepareStaging(st));
  // The host copies run on the calling thread's OpenMP team (io/base/parallel_copy.h), all
  // of its threads. On a 16-core H200 host, tau = 0.01 at Final-13682 size came 0.097-0.100
  // -> 0.075-0.080 s against 8 std::threads per chunk, which competed for the cores with
  // the team's threads still spinning after the solve's last parallel region
  // (bench/results/gpu-ba-setup-h200-20261126.json).
  const char* src = static_cast<const char*>(host_src);
  char* dst = static_cast<char*>(device_dst);
  bool pending[2] = {false, false};
  double wait_ms = 0.0, copy_ms = 0.0;
  for (size_t offset = 0, k = 0; offset < bytes; offset += kStageBytes, ++k) {
    const int slot = static_cast<int>(k % 2);
    const size_t len = std::min(kStageBytes, bytes - offset);
    const auto w0 = std::chrono::steady_clock::now();
    if (pending[slot]) TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(st.done[slot]));
    const auto w1 = std::chrono::steady_clock::now();
    // The host copy of this chunk while the copy engine reads the other buffer.
    ParallelCopy(st.buffer[slot], src + offset, len, /*threads=*/0);
    const auto w2 = std::chrono::steady_clock::now();
    wait_ms += std::chrono::duration<double, std::milli>(w1 - w0).count();
    copy_ms += std::chrono::duration<double, std::milli>(w2 - w1).count();
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + offset, st.buffer[slot], len, cudaMemcpyHostToDevice, st.stream));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(st.done[slot], st.stream));
    pending[slot] = true;
  }
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(st.stream));
  if (std::getenv("TIEPOINT_TIMING")) {
    std::fprintf(stderr, "[timing] upload staged %zu MB: %.2f ms (host copies %.2f, waits %.2f)\n", bytes >> 20,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                 copy_ms, wait_ms);
  }
  return Status::Ok();
}

void WarmUpCuda() {
  // Load every kernel now, with the context (this runs while the input is read), not at
  // each kernel's first launch in the timed solve.
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
  if (cudaFree(nullptr) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  // Keep freed device memory in the stream-ordered pool the solvers allocate from, and map
  // a first slice of it now (a quarter of the free memory, at most 4 GiB), so the solve's
  // allocations are served from memory already mapped.
  int device = 0;
  cudaMemPool_t pool;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  uint64_t threshold = UINT64_MAX;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  {
    // UploadStaged's pinned buffers now, while the input is read (pinning takes a few ms).
    Staging& st = TheStaging();
    std::lock_guard<std::mutex> lock(st.mutex);
    if (!PrepareStaging(st).ok()) cudaGetLastError();
  }
  const size_t reserve = std::min<size_t>(free_bytes / 4, size_t{4} << 30);
  void* p = nullptr;
  if (reserve > 0 && cudaMallocAsync(&p, reserve, 0) == cudaSuccess) {
    cudaFreeAsync(p, 0);
    cudaStreamSynchronize(0);
  }
  cudaGetLastError();
}

Status QueryCudaDevices(std::vector<CudaDeviceInfo>* devices) {
  devices->clear();
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later callers
    return Status::Unavailable(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  }
  if (count == 0) return Status::Unavailable("no CUDA device found");
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    CudaDeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.total_memory_bytes = prop.totalGlobalMem;
    info.compute_capability_major = prop.major;
    info.compute_capability_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    devices->push_back(info);
  }
  return Status::Ok();
}

}  // namespace tiepoint
