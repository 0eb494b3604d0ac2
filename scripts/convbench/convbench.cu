// convbench times the implicit-GEMM entries of kernels/cuda/src/conv.cu on
// ResNet-18's shapes at batch 100 (32x32 input), fp16, on random data. Each
// case runs its kernel (and splitk_reduce where split) 50 times inside one
// CUDA graph and prints the best of 5 replays per call, for the split that
// the backend picks (splitK in ops_conv.go at 2 blocks per SM), the split at
// 1 block per SM and none; "gemm" rows leave the reduction out. Build and
// run on the device (run.sh); CONV_SRC names another conv.cu to compare.
#ifndef CONV_SRC
#define CONV_SRC "../../kernels/cuda/src/conv.cu"
#endif
#include CONV_SRC
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1);} } while (0)

typedef void (*ConvFn)(ConvShape, const void*, const void*, void*, float*, const void*, int, int, int);
struct Case { const char* name; int mode; ConvShape s; };

static int sms;
__global__ void empty_k() {}
static void dims(int mode, const ConvShape& s, int& M, int& N, int& K) {
  if (mode == FWD) { M = s.N * s.P * s.Q; N = s.K; K = s.C * s.R * s.S; }
  else if (mode == BWDD) { M = s.N * s.H * s.W; N = s.C; K = s.K * s.R * s.S; }
  else { M = s.K; N = s.C * s.R * s.S; K = s.N * s.P * s.Q; }
}
static int splitK(int tiles, int kTiles, int per) {
  int target = per * sms;
  if (tiles >= target || kTiles < 4) return 1;
  int s = (target + tiles - 1) / tiles;
  s = std::min(std::min(s, kTiles / 2), 64);
  return std::max(s, 1);
}

int main(int argc, char** argv) {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  printf("%s, %d SMs\n", pr.name, sms);
  // N C H W K R S P Q stride pad
  std::vector<Case> cases = {
    {"l1 fwd 64x8x8 3x3", FWD, {100, 64, 8, 8, 64, 3, 3, 8, 8, 1, 1}},
    {"l2 fwd 128x4x4 3x3", FWD, {100, 128, 4, 4, 128, 3, 3, 4, 4, 1, 1}},
    {"l2 fwd s2 64x8x8->4x4", FWD, {100, 64, 8, 8, 128, 3, 3, 4, 4, 2, 1}},
    {"l3 fwd 256x2x2 3x3", FWD, {100, 256, 2, 2, 256, 3, 3, 2, 2, 1, 1}},
    {"l2 ds 1x1 s2", FWD, {100, 64, 8, 8, 128, 1, 1, 4, 4, 2, 0}},
    {"l1 bwdw 64x8x8", BWDW, {100, 64, 8, 8, 64, 3, 3, 8, 8, 1, 1}},
    {"l2 bwdw 128x4x4", BWDW, {100, 128, 4, 4, 128, 3, 3, 4, 4, 1, 1}},
    {"l3 bwdw 256x2x2", BWDW, {100, 256, 2, 2, 256, 3, 3, 2, 2, 1, 1}},
    {"l2 bwdd s2 ->64x8x8", BWDD, {100, 64, 8, 8, 128, 3, 3, 4, 4, 2, 1}},
    {"l1 bwdd s1 64x8x8", BWDD, {100, 64, 8, 8, 64, 3, 3, 8, 8, 1, 1}},
    {"l2 bwdd s1 128x4x4", BWDD, {100, 128, 4, 4, 128, 3, 3, 4, 4, 1, 1}},
    {"l3 bwdd s1 256x2x2", BWDD, {100, 256, 2, 2, 256, 3, 3, 2, 2, 1, 1}},
  };
  size_t big = 64 << 20;
  void *a, *b, *o; float* ws;
  CK(cudaMalloc(&a, big)); CK(cudaMalloc(&b, big)); CK(cudaMalloc(&o, big)); CK(cudaMalloc(&ws, big * 4));
  {
    std::vector<__half> h(big / 2);
    for (size_t i = 0; i < h.size(); i++) h[i] = __float2half((rand() % 2001 - 1000) / 1000.f);
    CK(cudaMemcpy(a, h.data(), big, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, h.data(), big, cudaMemcpyHostToDevice));
  }
  cudaStream_t st; CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const int REP = 50;
  for (auto& c : cases) {
    int M, N, K; dims(c.mode, c.s, M, N, K);
    int tm = (M + 63) / 64, tn = (N + 63) / 64, kt = (K + 31) / 32;
    bool vec = (c.mode == FWD && (c.s.C * c.s.R * c.s.S) % 8 == 0) || (c.mode == BWDW && (c.s.P * c.s.Q) % 8 == 0);
    ConvFn fn = c.mode == FWD ? (vec ? conv_fwd_f16_vec : conv_fwd_f16) : c.mode == BWDD ? conv_bwdd_f16 : (vec ? conv_bwdw_f16_vec : conv_bwdw_f16);
    int outLen = c.mode == FWD ? c.s.N * c.s.K * c.s.P * c.s.Q : c.mode == BWDD ? c.s.N * c.s.C * c.s.H * c.s.W : c.s.K * c.s.C * c.s.R * c.s.S;
    for (int nv = 0; nv < (vec ? 2 : 1); nv++) {
    if (nv) fn = c.mode == FWD ? conv_fwd_f16 : conv_bwdw_f16;
    for (int per : {2, 1, 0}) {
      int sp = per ? splitK(tm * tn, kt, per) : 1;
      int tps = (kt + sp - 1) / sp; sp = (kt + tps - 1) / tps;
      for (int withReduce : {1, 0}) {
        if (sp == 1 && !withReduce) continue;
        cudaGraph_t g; cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int r = 0; r < REP; r++) {
          fn<<<dim3(tm, tn, sp), 128, 0, st>>>(c.s, a, b, o, sp > 1 ? ws : nullptr, nullptr, 0, tps, outLen);
          if (sp > 1 && withReduce) splitk_reduce<<<(outLen / 4 + 255) / 256, 256, 0, st>>>(o, 1, ws, sp, outLen, nullptr, 0, 1, 1);
        }
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaStreamSynchronize(st));
        float best = 1e9;
        for (int t = 0; t < 5; t++) {
          CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st));
          CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); best = std::min(best, ms);
        }
        printf("%-24s M%5d N%5d K%5d grid(%d,%d,%d) tps %3d %s: %7.2f us/call\n", c.name, M, N, K, tm, tn, sp, tps,
               withReduce ? (sp > 1 ? "+reduce" : "       ") : "gemm   ", best * 1000 / REP);
        CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
      }
    }
    if (nv) printf("  ^ scalar entry\n");
    }
  }
  {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < REP; r++) empty_k<<<300, 128, 0, st>>>();
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
    CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("empty kernel grid 300 in a graph: %.2f us/call\n", ms * 1000 / REP);
  }
  return 0;
}
