// Batch assembly of the resnetlab CUDA backend (kernels.Batcher): the whole
// uint8 data set lives on the device and each training or test batch is
// gathered from it with its per-sample crop and flip, decided on the host by
// package data's keyed RNG. Values must equal the host pipeline's bit for
// bit: byte b becomes b/255 correctly rounded (__fdiv_rn, never a multiply by
// the reciprocal, which differs for some bytes), then the output dtype's
// round-to-nearest-even.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef long long i64;

__device__ __forceinline__ void st(void* p, int dt, i64 i, float v) {
  if (dt == 0) static_cast<float*>(p)[i] = v;
  else if (dt == 1) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// Crop mirrors cropEntry in ops_augment.go: source image, crop offsets into
// the image padded by `pad` on every side, horizontal flip (0 or 1).
struct Crop {
  int idx, dy, dx, flip;
};

// augment_batch writes y[k][c][y][x] (n x C x H x W, dtype ydt) =
// img[crops[k].idx][c][y+dy-pad][x'+dx-pad] / 255 with x' = x, or W-1-x when
// flipped, and 0 where that pixel lies outside the image. One thread per
// output element (grid-stride), so consecutive threads read one source row.
extern "C" __global__ void augment_batch(void* y, int ydt, const unsigned char* img, const Crop* crops, int n,
                                         int C, int H, int W, int pad) {
  i64 total = (i64)n * C * H * W;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    int x = (int)(i % W);
    i64 r = i / W;
    int row = (int)(r % H);
    r /= H;
    int c = (int)(r % C);
    int k = (int)(r / C);
    Crop cr = crops[k];
    int sy = row + cr.dy - pad;
    int sx = (cr.flip ? W - 1 - x : x) + cr.dx - pad;
    float v = 0.f;
    if (sy >= 0 && sy < H && sx >= 0 && sx < W) {
      v = __fdiv_rn((float)img[(((i64)cr.idx * C + c) * H + sy) * W + sx], 255.f);
    }
    st(y, ydt, i, v);
  }
}
