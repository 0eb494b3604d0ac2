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
#define __launch_bounds__(...)
#define __align__(x) __attribute__((aligned(x)))
#define __restrict__
struct dim3s { unsigned x, y, z; };
extern dim3s threadIdx, blockIdx, blockDim, gridDim;
struct uint4 { unsigned x, y, z, w; };
struct int4 { int x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
void __syncthreads();
int __syncthreads_or(int);
unsigned __vcmpeq2(unsigned, unsigned);
float __shfl_xor_sync(unsigned, float, int);
float __fadd_rn(float, float);
float __fsub_rn(float, float);
float __fmul_rn(float, float);
float __fdiv_rn(float, float);
float __fsqrt_rn(float);
using std::min; using std::max;
#include <algorithm>
