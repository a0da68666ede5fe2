// TIEPOINT_HOST_DEVICE marks the small geometry routines that CUDA kernels share with the
// CPU code (cubic.h, sample_draw.h): __host__ __device__ under nvcc, nothing otherwise.
#pragma once

#if defined(__CUDACC__)
#define TIEPOINT_HOST_DEVICE __host__ __device__
#else
#define TIEPOINT_HOST_DEVICE
#endif
