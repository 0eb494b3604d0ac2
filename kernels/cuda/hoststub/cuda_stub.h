// Host-side stand-ins for the CUDA keywords, types and intrinsics the kernels
// use, so that hostcheck.sh can type-check src/*.cu with g++ where nvcc is
// missing. Declarations only: nothing here runs.
#pragma once
#include <cmath>
#include <cstdint>
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __align__(x) __attribute__((aligned(x)))
#define __restrict__
struct dim3s { unsigned x, y, z; };
extern dim3s threadIdx, blockIdx, blockDim, gridDim;
struct uint4 { unsigned x, y, z, w; };
struct int4 { int x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
void __syncthreads();
int __syncthreads_or(int);
float __shfl_xor_sync(unsigned, float, int);
float __fdiv_rn(float, float);
using std::min; using std::max;
#include <algorithm>
