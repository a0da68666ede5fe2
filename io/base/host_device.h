// TIEPOINT_HOST_DEVICE marks the small routines that CUDA kernels share with the CPU code
// (solver/geometry cubic.h and sample_draw.h, io/bz2_block.h): __host__ __device__ under
// nvcc, nothing otherwise.
#pragma once

#if defined(__CUDACC__)
#define TIEPOINT_HOST_DEVICE __host__ __device__
#else
#define TIEPOINT_HOST_DEVICE
#endif
