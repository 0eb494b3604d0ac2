#pragma once
#include "cuda_stub.h"
struct __nv_bfloat16 { unsigned short x; };
float __bfloat162float(__nv_bfloat16);
__nv_bfloat16 __float2bfloat16_rn(float);
