#pragma once
#include "cuda_stub.h"
struct __half { unsigned short x; };
float __half2float(__half);
__half __float2half_rn(float);
__half __ushort_as_half(unsigned short);
unsigned short __half_as_ushort(__half);
