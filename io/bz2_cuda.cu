// bzip2 decoding on the GPU (io/bz2_cuda.h): the stages of io/bz2_block.h, many blocks at
// once.
#include "io/bz2_cuda.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

#include "io/base/cuda_buffer.h"
#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"
#include "io/bz2_block.h"

namespace tiepoint {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct DeviceBlock {
  uint64_t begin;
  uint64_t end;
  int32_t level;
  uint32_t crc;
};

struct DeviceState {
  int32_t status;
  int32_t n;
  int32_t orig_ptr;
  int32_t p0;
};

// Stage 1, one thread per block (sequential within a block).
__global__ void DecodeKernel(const uint8_t* data, uint64_t size, const DeviceBlock* blocks,
                             int count, size_t slot, uint8_t* selectors, uint8_t* ll,
                             DeviceState* state) {
  __shared__ bz2::Bz2Tables tables;
  const int b = blockIdx.x;
  if (b >= count) return;
  const DeviceBlock blk = blocks[b];
  bz2::Bz2BlockInfo info;
  uint8_t* my_ll = ll + static_cast<size_t>(b) * slot;
  int32_t err = bz2::DecodeBlockSymbols(data, size, blk.begin, blk.end, blk.level, &tables,
                                        selectors + static_cast<size_t>(b) * bz2::kMaxSelectors,
                                        my_ll, &info);
  if (err == bz2::kOk && info.stored_crc != blk.crc) err = bz2::kBadHeader;
  DeviceState st{err, 0, 0, 0};
  if (err == bz2::kOk) {
    st.n = info.n;
    st.orig_ptr = info.orig_ptr;
  }
  state[b] = st;
}

constexpr int kScatterWarps = 4;

// Stage 2's first part (bz2::ByteStarts and bz2::ScatterNext), one warp per block: the
// lanes take 32 consecutive positions; lanes holding the same byte get consecutive slots
// of its run in lane order (__match_any_sync), so the order is libbz2's.
__global__ void ScatterKernel(const uint8_t* ll, uint32_t* tt, size_t slot, DeviceState* state,
                              int count) {
  __shared__ int32_t next_slot[kScatterWarps][256];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int b = blockIdx.x * kScatterWarps + warp;
  if (b >= count) return;  // the whole warp
  const DeviceState st = state[b];
  if (st.status != bz2::kOk) return;
  int32_t* counter = next_slot[warp];
  for (int c = lane; c < 256; c += 32) counter[c] = 0;
  __syncwarp();
  const uint8_t* my_ll = ll + static_cast<size_t>(b) * slot;
  uint32_t* my_tt = tt + static_cast<size_t>(b) * slot;
  const unsigned below = (1u << lane) - 1;
  // Counts.
  for (int32_t base = 0; base < st.n; base += 32) {
    const int32_t i = base + lane;
    const unsigned active = __ballot_sync(0xffffffffu, i < st.n);
    if (i < st.n) {
      const unsigned peers = __match_any_sync(active, my_ll[i]);
      if ((peers & below) == 0) counter[my_ll[i]] += __popc(peers);
    }
    __syncwarp();
  }
  if (lane == 0) {
    int32_t sum = 0;
    for (int c = 0; c < 256; ++c) {
      const int32_t k = counter[c];
      counter[c] = sum;
      sum += k;
    }
  }
  __syncwarp();
  // Scatter.
  for (int32_t base = 0; base < st.n; base += 32) {
    const int32_t i = base + lane;
    const unsigned active = __ballot_sync(0xffffffffu, i < st.n);
    if (i < st.n) {
      const uint8_t c = my_ll[i];
      const unsigned peers = __match_any_sync(active, c);
      const int32_t pos = counter[c] + __popc(peers & below);
      my_tt[pos] = static_cast<uint32_t>(i) << 8;
      if (pos == st.orig_ptr) state[b].p0 = i;  // bz2::FirstPosition
      __syncwarp(active);
      if ((peers & below) == 0) counter[c] += __popc(peers);
    }
    __syncwarp();
  }
}

// Stage 2's second part, one thread per position (grid-stride over count x slot).
__global__ void CompleteKernel(const uint8_t* ll, uint32_t* tt, size_t slot,
                               const DeviceState* state, int count, int segments) {
  const size_t total = static_cast<size_t>(count) * slot;
  for (size_t g = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < total;
       g += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int b = static_cast<int>(g / slot);
    const int32_t j = static_cast<int32_t>(g - static_cast<size_t>(b) * slot);
    const DeviceState st = state[b];
    if (st.status != bz2::kOk || j >= st.n) continue;
    const int32_t step = bz2::SegmentStep(st.n, segments);
    tt[g] = bz2::CompleteEntry(tt[g], ll[g], bz2::IsSegmentHead(j, step, st.p0, segments));
  }
}

// bz2::WalkSegment's walk, writing: bytes one at a time up to a 4-byte boundary of `out`,
// then in 4-byte words (a quarter of the store transactions), the rest one at a time.
__device__ void WalkWrite(const uint32_t* tt, int32_t n, uint32_t p, uint8_t* out) {
  const int lead = static_cast<int>((4 - (reinterpret_cast<uintptr_t>(out) & 3)) & 3);
  uint32_t word = 0;
  int in_word = 0;
  int32_t k = 0;
  for (;;) {
    const uint32_t v = tt[p];
    const uint32_t byte = v & 0xffu;
    if (k < lead) {
      out[k] = static_cast<uint8_t>(byte);
    } else {
      word |= byte << (8 * in_word);
      if (++in_word == 4) {
        *reinterpret_cast<uint32_t*>(out + k - 3) = word;
        word = 0;
        in_word = 0;
      }
    }
    ++k;
    p = (v & bz2::kNextMask) >> 8;
    if ((tt[p] & bz2::kHeadFlag) || k >= n) break;
  }
  for (int m = 0; m < in_word; ++m) out[k - in_word + m] = static_cast<uint8_t>(word >> (8 * m));
}

// Stage 3, one thread per segment: measure (walked == nullptr) or write.
__global__ void WalkKernel(const uint32_t* tt, size_t slot, const DeviceState* state, int count,
                           int segments, int32_t* heads, int32_t* lengths, int* next,
                           const int32_t* offsets, uint8_t* walked) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int b = static_cast<int>(g / segments);
  const int s = static_cast<int>(g % segments);
  if (b >= count) return;
  const DeviceState st = state[b];
  if (st.status != bz2::kOk) return;
  const int32_t step = bz2::SegmentStep(st.n, segments);
  const int32_t head = bz2::SegmentHead(s, step, st.n, st.p0);
  if (walked == nullptr) heads[g] = head;
  if (head < 0) return;
  const uint32_t* my_tt = tt + static_cast<size_t>(b) * slot;
  int32_t length = 0;
  int nx = 0;
  if (walked == nullptr) {
    bz2::WalkSegment(my_tt, st.n, st.p0, step, head, nullptr, &length, &nx);
    lengths[g] = length;
    next[g] = nx;
  } else {
    WalkWrite(my_tt, st.n, static_cast<uint32_t>(head),
              walked + static_cast<size_t>(b) * slot + offsets[g]);
  }
}

__global__ void ChainKernel(DeviceState* state, int count, int segments, const int32_t* heads,
                            const int32_t* lengths, const int* next, int32_t* offsets) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= count || state[b].status != bz2::kOk) return;
  const size_t at = static_cast<size_t>(b) * segments;
  state[b].status = bz2::ChainSegments(lengths + at, next + at, heads + at, segments,
                                       state[b].n, offsets + at);
}

const char* ErrorName(int32_t e) {
  switch (e) {
    case bz2::kRandomised: return "randomised block (bzip2 0.9.0)";
    case bz2::kBadHeader: return "bad block header";
    case bz2::kBadCodeLengths: return "bad Huffman code lengths";
    case bz2::kBadSymbol: return "bad Huffman symbol";
    case bz2::kTooLong: return "block longer than its level allows";
    case bz2::kBadCounts: return "bad byte counts or origPtr";
    case bz2::kNotAtEnd: return "block does not end at the next magic";
    case bz2::kBrokenCycle: return "inverse BWT is not one cycle";
    case bz2::kBadRuns: return "run-length stage reads past the block";
    case bz2::kCrcMismatch: return "block CRC mismatch";
    case bz2::kNotRun: return "not decoded (out of host memory)";
    default: return "error";
  }
}

// Pinned buffers for the downloads, made once per process.
struct Pinned {
  std::mutex mutex;
  PinnedBuffer<char> buffer[2];
  static constexpr size_t kBytes = size_t{64} << 20;
};
Pinned& ThePinned() {
  static Pinned* p = new Pinned();  // never destroyed: usable until exit
  return *p;
}

// With p.mutex held.
Status PreparePinned(Pinned& p) {
  for (PinnedBuffer<char>& b : p.buffer) {
    TIEPOINT_RETURN_IF_ERROR(b.Reserve(Pinned::kBytes, "the bzip2 download buffers"));
  }
  return Status::Ok();
}

// Stage 4: the walked bytes of blocks [first, first + count) (block i at
// walked + i * slot) to the host, a group of blocks per pinned buffer, while the OpenMP
// team undoes the first run-length stage of the previous group into the host blocks.
Status Finish(const uint8_t* walked, size_t slot, int first, int count,
              const std::vector<int32_t>& n, const Bz2BlockPlan& plan, cudaStream_t stream,
              int threads, std::vector<std::string>* blocks, std::string* why) {
  Pinned& p = ThePinned();
  std::lock_guard<std::mutex> lock(p.mutex);
  TIEPOINT_RETURN_IF_ERROR(PreparePinned(p));
  cudaEvent_t done[2];
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done[0], cudaEventDisableTiming));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done[1], cudaEventDisableTiming));
  const int per_group = static_cast<int>(std::max<size_t>(1, Pinned::kBytes / slot));
  const int groups = (count + per_group - 1) / per_group;
  auto issue = [&](int g) -> cudaError_t {
    const int lo = g * per_group;
    const int hi = std::min(count, lo + per_group);
    // Up to the last block's end (the slots' unused tails come along).
    const size_t bytes = static_cast<size_t>(hi - 1 - lo) * slot + static_cast<size_t>(n[hi - 1]);
    cudaError_t e = cudaMemcpyAsync(p.buffer[g % 2].get(), walked + static_cast<size_t>(lo) * slot, bytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaEventRecord(done[g % 2], stream);
    return e;
  };
  cudaError_t err = groups > 0 ? issue(0) : cudaSuccess;
  int32_t failed = bz2::kOk;
  int failed_block = 0;
  for (int g = 0; g < groups && err == cudaSuccess && failed == bz2::kOk; ++g) {
    if (g + 1 < groups && (err = issue(g + 1)) != cudaSuccess) break;
    if ((err = cudaEventSynchronize(done[g % 2])) != cudaSuccess) break;
    const int lo = g * per_group;
    const int hi = std::min(count, lo + per_group);
    std::vector<int32_t> crcs(static_cast<size_t>(hi - lo));
    for (int i = lo; i < hi; ++i) crcs[i - lo] = static_cast<int32_t>(plan.blocks[first + i].crc);
    failed = bz2_detail::UndoBlocks(reinterpret_cast<const uint8_t*>(p.buffer[g % 2].get()), slot,
                                    n.data() + lo, crcs.data(), hi - lo, threads,
                                    blocks->data() + first + lo, &failed_block);
    failed_block += first + lo;
  }
  // The copy of the group after a failed one may still run.
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaEventDestroy(done[0]);
  cudaEventDestroy(done[1]);
  TIEPOINT_CUDA_RETURN_IF_ERROR(err);
  if (failed != bz2::kOk) {
    *why = "block at bit " + std::to_string(plan.blocks[failed_block].begin) + ": " +
           ErrorName(failed);
    return Status::InvalidInput("block");
  }
  return Status::Ok();
}

Status Decode(const char* data, size_t size, const Bz2CudaOptions& options, Bz2Decoded* out,
              std::string* why, Bz2CudaTiming* timing) {
  const int threads = bz2_detail::Threads(options.num_threads);
  auto t0 = Clock::now();
  const auto* d = reinterpret_cast<const unsigned char*>(data);
  Bz2BlockPlan plan;
  if (!PlanBz2Blocks(d, size, FindBz2Magics(d, size, threads), &plan, why)) {
    return Status::InvalidInput("plan");
  }
  timing->scan_seconds = Since(t0);
  const int segments = std::max(1, options.segments);
  const int total_blocks = static_cast<int>(plan.blocks.size());
  out->streams = plan.streams;
  out->blocks.resize(plan.blocks.size());
  if (total_blocks == 0) return Status::Ok();
  int max_level = 1;
  for (const auto& b : plan.blocks) max_level = std::max(max_level, b.level);
  const size_t slot = static_cast<size_t>(max_level) * 100000;

  int devices = 0;  // no context needed to count them
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    *why = "no usable CUDA device";
    return Status::Unavailable(*why);
  }
  // The host blocks sized, on all threads, for what stage 4 first asks of them, while
  // the CUDA context may still be in the making (tiepoint ba creates it on another thread
  // from the start): page faults on 1.7 GB cost the host more than the kernels take, and
  // stage 4 then finds its memory mapped.
  t0 = Clock::now();
  bz2_detail::ResizeBlocks(&out->blocks, 0, total_blocks,
                           bz2_detail::RunsCapacity(static_cast<int32_t>(slot)), threads);
  timing->presize_seconds = Since(t0);

  t0 = Clock::now();
  cudaStream_t stream;  // the first CUDA call: waits for the context
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  timing->context_seconds = Since(t0);
  // The pinned buffers of stage 4 (128 MB: tens of ms) while the upload and the kernels
  // run; Finish makes them itself if this thread could not.
  std::thread pinning;
  try {
    pinning = std::thread([] {
      Pinned& p = ThePinned();
      std::lock_guard<std::mutex> lock(p.mutex);
      if (!PreparePinned(p).ok()) cudaGetLastError();
    });
  } catch (const std::system_error&) {
  }
  struct Joiner {
    std::thread& t;
    ~Joiner() { if (t.joinable()) t.join(); }
  } pinning_joiner{pinning};
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamSynchronize(s); cudaStreamDestroy(s); }
  } stream_guard{stream};

  t0 = Clock::now();
  PoolArray<uint8_t> compressed;
  TIEPOINT_RETURN_IF_ERROR(compressed.Allocate(size, stream));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  TIEPOINT_RETURN_IF_ERROR(UploadStaged(compressed.get(), data, size));
  timing->upload_seconds = Since(t0);

  const size_t per_block = slot * (1 + sizeof(uint32_t)) + bz2::kMaxSelectors +
                           static_cast<size_t>(segments) * 16 + sizeof(DeviceBlock) +
                           sizeof(DeviceState);
  size_t budget = options.memory_bytes;
  if (budget == 0) {
    size_t free_bytes = 0, total_bytes = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    budget = free_bytes / 2;
  }
  const int batch = static_cast<int>(std::max<size_t>(1, std::min<size_t>(total_blocks, budget / per_block)));

  t0 = Clock::now();
  std::vector<DeviceBlock> host_blocks(plan.blocks.size());
  for (size_t i = 0; i < plan.blocks.size(); ++i) {
    const auto& b = plan.blocks[i];
    host_blocks[i] = {b.begin, b.end, b.level, b.crc};
  }
  PoolArray<DeviceBlock> blocks;
  PoolArray<DeviceState> state;
  PoolArray<uint8_t> selectors, ll;
  PoolArray<uint32_t> tt;
  PoolArray<int32_t> heads, lengths, offsets;
  PoolArray<int> next;
  const size_t segs = static_cast<size_t>(batch) * segments;
  TIEPOINT_RETURN_IF_ERROR(blocks.Allocate(batch, stream));
  TIEPOINT_RETURN_IF_ERROR(state.Allocate(batch, stream));
  TIEPOINT_RETURN_IF_ERROR(selectors.Allocate(static_cast<size_t>(batch) * bz2::kMaxSelectors, stream));
  TIEPOINT_RETURN_IF_ERROR(ll.Allocate(static_cast<size_t>(batch) * slot, stream));
  TIEPOINT_RETURN_IF_ERROR(tt.Allocate(static_cast<size_t>(batch) * slot, stream));
  TIEPOINT_RETURN_IF_ERROR(heads.Allocate(segs, stream));
  TIEPOINT_RETURN_IF_ERROR(lengths.Allocate(segs, stream));
  TIEPOINT_RETURN_IF_ERROR(offsets.Allocate(segs, stream));
  TIEPOINT_RETURN_IF_ERROR(next.Allocate(segs, stream));

  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  timing->allocate_seconds = Since(t0);
  // With TIEPOINT_TIMING: events around each kernel (decode, scatter, complete, walk 1,
  // chain, walk 2).
  struct Events {
    bool on = std::getenv("TIEPOINT_TIMING") != nullptr;
    std::vector<cudaEvent_t> e;
    void Mark(cudaStream_t st) {
      if (!on) return;
      cudaEvent_t ev;
      if (cudaEventCreate(&ev) != cudaSuccess) return;
      cudaEventRecord(ev, st);
      e.push_back(ev);
    }
    void Report(std::vector<double>& ms) {
      for (size_t k = 0; k + 1 < e.size(); ++k) {
        float t = 0;
        cudaEventElapsedTime(&t, e[k], e[k + 1]);
        if (ms.size() <= k) ms.resize(k + 1, 0.0);
        ms[k] += t;
      }
      for (cudaEvent_t ev : e) cudaEventDestroy(ev);
      e.clear();
    }
  } events;
  std::vector<DeviceState> host_state(batch);
  for (int first = 0; first < total_blocks; first += batch) {
    ++timing->batches;
    const int count = std::min(batch, total_blocks - first);
    t0 = Clock::now();
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(blocks.get(), host_blocks.data() + first, count * sizeof(DeviceBlock), cudaMemcpyHostToDevice, stream));
    events.Mark(stream);
    DecodeKernel<<<count, 1, 0, stream>>>(compressed.get(), size, blocks.get(), count, slot, selectors.get(), ll.get(), state.get());
    events.Mark(stream);
    ScatterKernel<<<(count + kScatterWarps - 1) / kScatterWarps, 32 * kScatterWarps, 0, stream>>>(ll.get(), tt.get(), slot, state.get(), count);
    events.Mark(stream);
    CompleteKernel<<<std::max(1, std::min(count * 64, 65535)), 256, 0, stream>>>(ll.get(), tt.get(), slot, state.get(), count, segments);
    events.Mark(stream);
    const int64_t walkers = static_cast<int64_t>(count) * segments;
    const int walk_blocks = static_cast<int>((walkers + 255) / 256);
    WalkKernel<<<walk_blocks, 256, 0, stream>>>(tt.get(), slot, state.get(), count, segments, heads.get(), lengths.get(), next.get(), nullptr, nullptr);
    events.Mark(stream);
    ChainKernel<<<(count + 127) / 128, 128, 0, stream>>>(state.get(), count, segments, heads.get(), lengths.get(), next.get(), offsets.get());
    events.Mark(stream);
    // The walked bytes overwrite ll (tt holds each byte too).
    WalkKernel<<<walk_blocks, 256, 0, stream>>>(tt.get(), slot, state.get(), count, segments, heads.get(), lengths.get(), next.get(), offsets.get(), ll.get());
    events.Mark(stream);
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_state.data(), state.get(), count * sizeof(DeviceState), cudaMemcpyDeviceToHost, stream));
    if (pinning.joinable()) pinning.join();
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    events.Report(timing->stage_ms);
    std::vector<int32_t> n(count);
    for (int i = 0; i < count; ++i) {
      if (host_state[i].status != bz2::kOk) {
        *why = "block at bit " + std::to_string(plan.blocks[first + i].begin) + ": " +
               ErrorName(host_state[i].status);
        return Status::InvalidInput("block");
      }
      n[i] = host_state[i].n;
    }
    timing->kernels_seconds += Since(t0);

    t0 = Clock::now();
    TIEPOINT_RETURN_IF_ERROR(Finish(ll.get(), slot, first, count, n, plan, stream, threads, &out->blocks, why));
    for (int i = 0; i < count; ++i) out->size += out->blocks[first + i].size();
    timing->download_seconds += Since(t0);
  }
  return Status::Ok();
}

}  // namespace

bool TryDecompressBz2Cuda(const char* data, size_t size, const Bz2CudaOptions& options,
                          Bz2Decoded* out, std::string* why, Bz2CudaTiming* timing) {
  *out = Bz2Decoded();
  std::string reason;
  Bz2CudaTiming local;
  if (timing == nullptr) timing = &local;
  *timing = Bz2CudaTiming();
  const Status s = [&]() -> Status {
    try {
      return Decode(data, size, options, out, &reason, timing);
    } catch (const std::bad_alloc&) {
      reason = "out of host memory";
      return Status::OutOfMemory(reason);
    }
  }();
  if (!s.ok()) {
    cudaGetLastError();
    *out = Bz2Decoded();
    if (why != nullptr) *why = reason.empty() ? s.message() : reason;
    return false;
  }
  if (std::getenv("TIEPOINT_TIMING")) {
    std::fprintf(stderr,
                 "[timing] bzip2 on the GPU: %zu MB -> %zu MB, scan %.3f s, presize %.3f s, "
                 "context %.3f s, upload %.3f s, allocate %.3f s, kernels %.3f s, download and "
                 "runs %.3f s, %d batch(es); kernels (ms):",
                 size >> 20, out->size >> 20, timing->scan_seconds, timing->presize_seconds,
                 timing->context_seconds,
                 timing->upload_seconds, timing->allocate_seconds, timing->kernels_seconds,
                 timing->download_seconds, timing->batches);
    for (double ms : timing->stage_ms) std::fprintf(stderr, " %.1f", ms);
    std::fprintf(stderr, "\n");
  }
  return true;
}

}  // namespace tiepoint
