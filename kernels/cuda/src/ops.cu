// Element-wise, normalisation, pooling, loss and multi-tensor kernels of the
// resnetlab CUDA backend. Tensor pointers come with a dtype code (0 fp32,
// 1 fp16, 2 bf16, as kernels.DType); arithmetic is fp32 and every store
// rounds to nearest even. Reductions use a fixed order (per-thread strided
// sums, then a warp tree, then warps in index order), so results are
// deterministic run to run.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef long long i64;

__device__ __forceinline__ float ld(const void* p, int dt, i64 i) {
  if (dt == 0) return static_cast<const float*>(p)[i];
  if (dt == 1) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ __forceinline__ void st(void* p, int dt, i64 i, float v) {
  if (dt == 0) static_cast<float*>(p)[i] = v;
  else if (dt == 1) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// idiv is i / d for a non-negative i, in 32 bits where i fits (a 64-bit
// division is a long software sequence on the GPU).
__device__ __forceinline__ i64 idiv(i64 i, unsigned d) {
  return (i >> 32) == 0 ? (i64)((unsigned)i / d) : i / (i64)d;
}

#define GRID_LOOP(i, n) for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

extern "C" __global__ void fill(void* y, int dt, i64 n, float v) {
  GRID_LOOP(i, n) st(y, dt, i, v);
}

extern "C" __global__ void scale(void* y, int dt, i64 n, float s) {
  GRID_LOOP(i, n) st(y, dt, i, ld(y, dt, i) * s);
}

extern "C" __global__ void convert(void* y, int ydt, const void* x, int xdt, i64 n) {
  GRID_LOOP(i, n) st(y, ydt, i, ld(x, xdt, i));
}

extern "C" __global__ void relu_fwd(void* y, int ydt, const void* x, int xdt, i64 n) {
  GRID_LOOP(i, n) {
    float v = ld(x, xdt, i);
    st(y, ydt, i, v > 0.f ? v : 0.f);
  }
}

extern "C" __global__ void relu_bwd(void* dx, int dxdt, const void* dy, int dydt, const void* y, int ydt, i64 n) {
  GRID_LOOP(i, n) st(dx, dxdt, i, ld(y, ydt, i) > 0.f ? ld(dy, dydt, i) : 0.f);
}

extern "C" __global__ void add(void* y, int ydt, const void* a, int adt, const void* b, int bdt, i64 n) {
  GRID_LOOP(i, n) st(y, ydt, i, ld(a, adt, i) + ld(b, bdt, i));
}

// avgpool_fwd: y[i] = mean of x[i*hw .. i*hw+hw) for i < nc.
extern "C" __global__ void avgpool_fwd(void* y, int ydt, const void* x, int xdt, i64 nc, int hw) {
  GRID_LOOP(i, nc) {
    float s = 0.f;
    for (int j = 0; j < hw; j++) s += ld(x, xdt, i * hw + j);
    st(y, ydt, i, s / (float)hw);
  }
}

extern "C" __global__ void avgpool_bwd(void* dx, int dxdt, const void* dy, int dydt, i64 n, int hw) {
  GRID_LOOP(i, n) st(dx, dxdt, i, ld(dy, dydt, idiv(i, hw)) / (float)hw);
}

// bias_grad: db[o] = sum over rows n of dy[n*O+o], rows in order.
extern "C" __global__ void bias_grad(void* db, int dbdt, const void* dy, int dydt, int N, int O) {
  GRID_LOOP(o, O) {
    float s = 0.f;
    for (int n = 0; n < N; n++) s += ld(dy, dydt, (i64)n * O + o);
    st(db, dbdt, o, s);
  }
}

struct PoolShape {
  int N, C, H, W, P, Q, K, stride, pad;
};

// windowMax scans the pooling window of output (p,q) of one plane row-major
// and returns the first maximum's in-plane index (-1 if the window is empty).
__device__ __forceinline__ int windowArgmax(const void* x, int xdt, i64 plane, const PoolShape& s, int p, int q,
                                            float* best) {
  int h0 = p * s.stride - s.pad, w0 = q * s.stride - s.pad, arg = -1;
  float b = 0.f;
  for (int r = 0; r < s.K; r++) {
    int h = h0 + r;
    if (h < 0 || h >= s.H) continue;
    for (int c = 0; c < s.K; c++) {
      int w = w0 + c;
      if (w < 0 || w >= s.W) continue;
      float v = ld(x, xdt, plane + h * s.W + w);
      if (arg < 0 || v > b || v != v) { b = v; arg = h * s.W + w; }  // NaN wins, as on the CPU
    }
  }
  *best = b;
  return arg;
}

extern "C" __global__ void maxpool_fwd(void* y, int ydt, const void* x, int xdt, PoolShape s) {
  i64 n = (i64)s.N * s.C * s.P * s.Q;
  GRID_LOOP(i, n) {
    int PQ = s.P * s.Q;
    i64 pl = idiv(i, PQ);
    int pq = (int)(i - pl * PQ), p = pq / s.Q, q = pq - p * s.Q;
    float b;
    windowArgmax(x, xdt, pl * s.H * s.W, s, p, q, &b);
    st(y, ydt, i, b);
  }
}

// maxpool_argmax stores, for every output, the in-plane index of its window's
// first maximum; maxpool_bwd then gathers without atomics.
extern "C" __global__ void maxpool_argmax(int* idx, const void* x, int xdt, PoolShape s) {
  i64 n = (i64)s.N * s.C * s.P * s.Q;
  GRID_LOOP(i, n) {
    int PQ = s.P * s.Q;
    i64 pl = idiv(i, PQ);
    int pq = (int)(i - pl * PQ), p = pq / s.Q, q = pq - p * s.Q;
    float b;
    idx[i] = windowArgmax(x, xdt, pl * s.H * s.W, s, p, q, &b);
  }
}

extern "C" __global__ void maxpool_bwd(void* dx, int dxdt, const void* dy, int dydt, const int* idx, PoolShape s) {
  i64 n = (i64)s.N * s.C * s.H * s.W;
  GRID_LOOP(i, n) {
    int HW = s.H * s.W;
    i64 pl = idiv(i, HW);
    int hw = (int)(i - pl * HW), h = hw / s.W, w = hw - h * s.W;
    int th = h + s.pad - s.K + 1, tw = w + s.pad - s.K + 1;
    int p0 = th <= 0 ? 0 : (th + s.stride - 1) / s.stride;
    int q0 = tw <= 0 ? 0 : (tw + s.stride - 1) / s.stride;
    int p1 = min(s.P - 1, (h + s.pad) / s.stride), q1 = min(s.Q - 1, (w + s.pad) / s.stride);
    float acc = 0.f;
    for (int p = p0; p <= p1; p++)
      for (int q = q0; q <= q1; q++) {
        i64 o = pl * s.P * s.Q + p * s.Q + q;
        if (idx[o] == hw) acc += ld(dy, dydt, o);
      }
    st(dx, dxdt, i, acc);
  }
}

// blockSum returns the sum of v over the block to every thread, in a fixed
// order. blockDim.x must be a multiple of 32; sh holds 32 floats.
__device__ float blockSum(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += sh[w];
  return t;
}

// ---- Batch norm, alone and fused with (residual add +) ReLU ----
// Each kernel below is an instance of one template body; act = true is the
// fused form (kernels.FusedBN): batch norm, then add, then relu_fwd on each
// element, with every store of the separate path replaced by the rounding
// that store and the next load would do (rnd). The expressions and their
// order are those of the separate kernels (so the same FMA contractions):
// the fused results are bit-identical to bn_fwd_* then add then relu_fwd,
// and to relu_bwd then bn_bwd.

// rnd rounds v to dtype dt exactly as st then ld would.
__device__ __forceinline__ float rnd(int dt, float v) {
  if (dt == 0) return v;
  if (dt == 1) return __half2float(__float2half_rn(v));
  return __bfloat162float(__float2bfloat16_rn(v));
}

// actOut takes the batch-norm value v of an element (as bn_fwd_* stores it
// into y), then does add (v + r, when hasRes) and relu_fwd.
__device__ __forceinline__ float actOut(float v, int ydt, bool hasRes, float r) {
  v = rnd(ydt, v);
  if (hasRes) v = rnd(ydt, v + r);
  return v > 0.f ? v : 0.f;
}

// reluGrad is relu_bwd's value for an element, rounded to y's dtype (the
// dtype of the buffer relu_bwd writes in the separate path).
__device__ __forceinline__ float reluGrad(float dy, float y, int ydt) { return rnd(ydt, y > 0.f ? dy : 0.f); }

// ---- Chunked access for the batch-norm kernels ----
// A channel's N*HW elements are walked in chunks of V consecutive elements
// of one plane: V divides HW and every operand is aligned to V elements
// (bnVec on the host picks V), so a load moves up to 16 bytes and the index
// math is one 32-bit division per chunk. The chunk walk fixes the order of
// the sums: thread t adds chunks t, t+B, t+2B, ... element by element, then
// blockSum adds the threads.

__device__ __forceinline__ float toF32(float v) { return v; }
__device__ __forceinline__ float toF32(__half v) { return __half2float(v); }
__device__ __forceinline__ float toF32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T fromF32(float v);
template <> __device__ __forceinline__ float fromF32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromF32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromF32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// moveBytes copies V elements of T between aligned addresses in the widest
// accesses their size allows.
template <int V, typename T> __device__ __forceinline__ void moveBytes(T* dst, const T* src) {
  constexpr int B = V * (int)sizeof(T);
  if constexpr (B >= 16) {
#pragma unroll
    for (int i = 0; i < B / 16; i++) reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  } else if constexpr (B == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (B == 4) {
    *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src);
  } else {
    *dst = *src;
  }
}

template <int V, typename T> __device__ __forceinline__ void ldChunkT(const T* p, float (&v)[V]) {
  alignas(16) T t[V];
  moveBytes<V>(t, p);
#pragma unroll
  for (int i = 0; i < V; i++) v[i] = toF32(t[i]);
}

template <int V, typename T> __device__ __forceinline__ void stChunkT(T* p, const float (&v)[V]) {
  alignas(16) T t[V];
#pragma unroll
  for (int i = 0; i < V; i++) t[i] = fromF32<T>(v[i]);
  moveBytes<V>(p, t);
}

// ldChunk / stChunk: V elements at element offset i of a tensor of dtype dt
// (the values and roundings of ld and st).
template <int V> __device__ __forceinline__ void ldChunk(const void* p, int dt, i64 i, float (&v)[V]) {
  if (dt == 0) ldChunkT<V>(static_cast<const float*>(p) + i, v);
  else if (dt == 1) ldChunkT<V>(static_cast<const __half*>(p) + i, v);
  else ldChunkT<V>(static_cast<const __nv_bfloat16*>(p) + i, v);
}

template <int V> __device__ __forceinline__ void stChunk(void* p, int dt, i64 i, const float (&v)[V]) {
  if (dt == 0) stChunkT<V>(static_cast<float*>(p) + i, v);
  else if (dt == 1) stChunkT<V>(static_cast<__half*>(p) + i, v);
  else stChunkT<V>(static_cast<__nv_bfloat16*>(p) + i, v);
}

// chunkAt is the element offset of chunk u of channel c (cpr chunks per plane).
template <int V> __device__ __forceinline__ i64 chunkAt(unsigned u, unsigned cpr, int C, int HW, int c) {
  const unsigned n = u / cpr;
  return ((i64)n * C + c) * HW + (i64)(u - n * cpr) * V;
}

// BN_DISPATCH instantiates body for the chunk width v the host chose.
#define BN_DISPATCH(v, body) \
  switch (v) {               \
    case 8: body(8); break;  \
    case 4: body(4); break;  \
    case 2: body(2); break;  \
    default: body(1);        \
  }

// bnFwdTrain: one block per channel c. Two-pass mean/variance (no
// cancellation), normalise, and update the running statistics.
template <int V, bool act>
__device__ __forceinline__ void bnFwdTrain(void* y, int ydt, const void* x, int xdt, const void* res, int rdt,
                                           const float* gamma, const float* beta, float* runMean, float* runVar,
                                           float* saveMean, float* saveInv, int N, int C, int HW, float mom,
                                           float eps, float* sh) {
  const int c = blockIdx.x;
  const i64 M = (i64)N * HW;
  const unsigned cpr = HW / V, chunks = (unsigned)(M / V);
  float s = 0.f;
  for (unsigned u = threadIdx.x; u < chunks; u += blockDim.x) {
    float v[V];
    ldChunk<V>(x, xdt, chunkAt<V>(u, cpr, C, HW, c), v);
#pragma unroll
    for (int e = 0; e < V; e++) s += v[e];
  }
  const float mean = blockSum(s, sh) / (float)M;
  float q = 0.f;
  for (unsigned u = threadIdx.x; u < chunks; u += blockDim.x) {
    float v[V];
    ldChunk<V>(x, xdt, chunkAt<V>(u, cpr, C, HW, c), v);
#pragma unroll
    for (int e = 0; e < V; e++) {
      float d = v[e] - mean;
      q += d * d;
    }
  }
  const float var = blockSum(q, sh) / (float)M;
  const float inv = 1.f / sqrtf(var + eps);
  const float a = gamma[c] * inv, b = beta[c];
  for (unsigned u = threadIdx.x; u < chunks; u += blockDim.x) {
    const i64 k = chunkAt<V>(u, cpr, C, HW, c);
    float v[V], r[V] = {};
    ldChunk<V>(x, xdt, k, v);
    if (act && res != nullptr) ldChunk<V>(res, rdt, k, r);
#pragma unroll
    for (int e = 0; e < V; e++) {
      float o = (v[e] - mean) * a + b;
      v[e] = act ? actOut(o, ydt, res != nullptr, r[e]) : o;
    }
    stChunk<V>(y, ydt, k, v);
  }
  if (threadIdx.x == 0) {
    saveMean[c] = mean;
    saveInv[c] = inv;
    float unb = M > 1 ? var * (float)M / (float)(M - 1) : var;
    runMean[c] = (1.f - mom) * runMean[c] + mom * mean;
    runVar[c] = (1.f - mom) * runVar[c] + mom * unb;
  }
}

extern "C" __global__ void bn_fwd_train(void* y, int ydt, const void* x, int xdt, const float* gamma,
                                        const float* beta, float* runMean, float* runVar, float* saveMean,
                                        float* saveInv, int N, int C, int HW, float mom, float eps, int vec) {
  __shared__ float sh[32];
#define BODY(v)                                                                                                 \
  bnFwdTrain<v, false>(y, ydt, x, xdt, nullptr, 0, gamma, beta, runMean, runVar, saveMean, saveInv, N, C, HW, \
                       mom, eps, sh)
  BN_DISPATCH(vec, BODY)
#undef BODY
}

extern "C" __global__ void bn_act_fwd_train(void* y, int ydt, const void* x, int xdt, const void* res, int rdt,
                                            const float* gamma, const float* beta, float* runMean, float* runVar,
                                            float* saveMean, float* saveInv, int N, int C, int HW, float mom,
                                            float eps, int vec) {
  __shared__ float sh[32];
#define BODY(v)                                                                                                   \
  bnFwdTrain<v, true>(y, ydt, x, xdt, res, rdt, gamma, beta, runMean, runVar, saveMean, saveInv, N, C, HW, mom, \
                      eps, sh)
  BN_DISPATCH(vec, BODY)
#undef BODY
}

// bnFwdEval: a thread per chunk of the whole tensor (chunks never cross a
// plane, so the channel is the chunk's plane mod C).
template <int V, bool act>
__device__ __forceinline__ void bnFwdEval(void* y, int ydt, const void* x, int xdt, const void* res, int rdt,
                                          const float* gamma, const float* beta, const float* runMean,
                                          const float* runVar, int N, int C, int HW, float eps) {
  const i64 chunks = (i64)N * C * HW / V;
  const unsigned cpr = HW / V;
  GRID_LOOP(u, chunks) {
    const i64 pl = idiv(u, cpr);
    const int c = (int)(pl - idiv(pl, C) * C);
    const i64 k = u * V;
    float v[V], r[V] = {};
    ldChunk<V>(x, xdt, k, v);
    if (act && res != nullptr) ldChunk<V>(res, rdt, k, r);
    const float a = gamma[c] * (1.f / sqrtf(runVar[c] + eps)), m = runMean[c], b = beta[c];
#pragma unroll
    for (int e = 0; e < V; e++) {
      float o = (v[e] - m) * a + b;
      v[e] = act ? actOut(o, ydt, res != nullptr, r[e]) : o;
    }
    stChunk<V>(y, ydt, k, v);
  }
}

extern "C" __global__ void bn_fwd_eval(void* y, int ydt, const void* x, int xdt, const float* gamma,
                                       const float* beta, const float* runMean, const float* runVar, int N, int C,
                                       int HW, float eps, int vec) {
#define BODY(v) bnFwdEval<v, false>(y, ydt, x, xdt, nullptr, 0, gamma, beta, runMean, runVar, N, C, HW, eps)
  BN_DISPATCH(vec, BODY)
#undef BODY
}

extern "C" __global__ void bn_act_fwd_eval(void* y, int ydt, const void* x, int xdt, const void* res, int rdt,
                                           const float* gamma, const float* beta, const float* runMean,
                                           const float* runVar, int N, int C, int HW, float eps, int vec) {
#define BODY(v) bnFwdEval<v, true>(y, ydt, x, xdt, res, rdt, gamma, beta, runMean, runVar, N, C, HW, eps)
  BN_DISPATCH(vec, BODY)
#undef BODY
}

// bnBwd: one block per channel. dbeta = sum dy, dgamma = sum dy*xhat,
// dx = gamma*inv * (dy - dbeta/M - xhat*dgamma/M). dx may be null. With
// act, dy is first masked by relu_bwd on the fused output y (reluGrad's
// value); the masked gradient is stored to ds (y's dtype) when ds is not
// null, and the second pass reads it back where it was written.
template <int V, bool act>
__device__ __forceinline__ void bnBwd(void* dx, int dxdt, void* ds, const void* dy, int dydt, const void* y,
                                      int ydt, const void* x, int xdt, const float* gamma, const float* saveMean,
                                      const float* saveInv, float* dgamma, float* dbeta, int N, int C, int HW,
                                      float* sh) {
  const int c = blockIdx.x;
  const i64 M = (i64)N * HW;
  const unsigned cpr = HW / V, chunks = (unsigned)(M / V);
  const float mean = saveMean[c], inv = saveInv[c];
  // grad loads chunk k of the (masked) gradient into d.
  auto grad = [&](i64 k, float (&d)[V], bool stored) {
    if (!act || (stored && ds != nullptr)) {
      ldChunk<V>(act ? ds : dy, act ? ydt : dydt, k, d);
      return;
    }
    float yv[V];
    ldChunk<V>(dy, dydt, k, d);
    ldChunk<V>(y, ydt, k, yv);
#pragma unroll
    for (int e = 0; e < V; e++) d[e] = reluGrad(d[e], yv[e], ydt);
  };
  float sdy = 0.f, sdyx = 0.f;
  for (unsigned u = threadIdx.x; u < chunks; u += blockDim.x) {
    const i64 k = chunkAt<V>(u, cpr, C, HW, c);
    float d[V], xv[V];
    grad(k, d, false);
    if (act && ds != nullptr) stChunk<V>(ds, ydt, k, d);
    ldChunk<V>(x, xdt, k, xv);
#pragma unroll
    for (int e = 0; e < V; e++) {
      sdy += d[e];
      sdyx += d[e] * (xv[e] - mean);
    }
  }
  const float db = blockSum(sdy, sh);
  const float dg = blockSum(sdyx, sh) * inv;
  if (threadIdx.x == 0) {
    dgamma[c] = dg;
    dbeta[c] = db;
  }
  if (dx == nullptr) return;
  const float k1 = gamma[c] * inv, mdb = db / (float)M, mdg = dg / (float)M;
  for (unsigned u = threadIdx.x; u < chunks; u += blockDim.x) {
    const i64 k = chunkAt<V>(u, cpr, C, HW, c);
    float d[V], xv[V];
    ldChunk<V>(x, xdt, k, xv);
    grad(k, d, true);
#pragma unroll
    for (int e = 0; e < V; e++) {
      float xh = (xv[e] - mean) * inv;
      d[e] = k1 * (d[e] - mdb - xh * mdg);
    }
    stChunk<V>(dx, dxdt, k, d);
  }
}

extern "C" __global__ void bn_bwd(void* dx, int dxdt, const void* dy, int dydt, const void* x, int xdt,
                                  const float* gamma, const float* saveMean, const float* saveInv, float* dgamma,
                                  float* dbeta, int N, int C, int HW, int vec) {
  __shared__ float sh[32];
#define BODY(v)                                                                                                  \
  bnBwd<v, false>(dx, dxdt, nullptr, dy, dydt, nullptr, 0, x, xdt, gamma, saveMean, saveInv, dgamma, dbeta, N, \
                  C, HW, sh)
  BN_DISPATCH(vec, BODY)
#undef BODY
}

extern "C" __global__ void bn_act_bwd(void* dx, int dxdt, void* ds, const void* dy, int dydt, const void* y, int ydt,
                                      const void* x, int xdt, const float* gamma, const float* saveMean,
                                      const float* saveInv, float* dgamma, float* dbeta, int N, int C, int HW,
                                      int vec) {
  __shared__ float sh[32];
#define BODY(v)                                                                                                   \
  bnBwd<v, true>(dx, dxdt, ds, dy, dydt, y, ydt, x, xdt, gamma, saveMean, saveInv, dgamma, dbeta, N, C, HW, sh)
  BN_DISPATCH(vec, BODY)
#undef BODY
}

// softmax_ce: one block; warp w handles rows w, w+nw, ...; the loss is the
// mean over rows of logsumexp(row) - row[label], summed in a fixed order.
extern "C" __global__ void softmax_ce(void* loss, int lossdt, void* dl, int dldt, const void* logits, int lgdt,
                                      const void* labels, int labdt, int N, int K, float scale) {
  __shared__ float part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  float wsum = 0.f;
  for (int n = warp; n < N; n += nw) {
    const i64 row = (i64)n * K;
    float mx = -INFINITY;
    for (int j = lane; j < K; j += 32) mx = fmaxf(mx, ld(logits, lgdt, row + j));
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float se = 0.f;
    for (int j = lane; j < K; j += 32) se += expf(ld(logits, lgdt, row + j) - mx);
    for (int o = 16; o > 0; o >>= 1) se += __shfl_xor_sync(0xffffffffu, se, o);
    const int lab = (int)ld(labels, labdt, n);
    const bool ok = lab >= 0 && lab < K;
    if (lane == 0) wsum += ok ? (mx + logf(se)) - ld(logits, lgdt, row + lab) : NAN;
    if (dl != nullptr) {
      for (int j = lane; j < K; j += 32) {
        float pj = expf(ld(logits, lgdt, row + j) - mx) / se;
        st(dl, dldt, row + j, (pj - (j == lab ? 1.f : 0.f)) * scale / (float)N);
      }
    }
  }
  if (lane == 0) part[warp] = wsum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < nw; w++) t += part[w];
    st(loss, lossdt, 0, t / (float)N);
  }
}

// Multi-tensor kernels: a device table lists the tensors; tensor t owns
// blocks [blockStart[t], blockStart[t+1]), each block CHUNK elements.
#define CHUNK 4096

template <typename E>
__device__ __forceinline__ int findTensor(const E* tab, int ntab, int b) {
  int lo = 0, hi = ntab - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (tab[mid].blockStart <= b) lo = mid; else hi = mid - 1;
  }
  return lo;
}

struct NFEntry {
  const void* p;
  i64 n;
  int blockStart;
  int dt;
};

// nonfiniteWord reports whether a 32-bit word of dtype dt holds an inf or
// NaN (an all-ones exponent): one fp32 element or two 2-byte ones.
__device__ __forceinline__ bool nonfiniteWord(unsigned w, int dt) {
  if (dt == 0) return (w & 0x7f800000u) == 0x7f800000u;
  const unsigned m = dt == 1 ? 0x7c007c00u : 0x7f807f80u;
  return __vcmpeq2(w & m, m) != 0u;
}

__device__ __forceinline__ bool nonfiniteAt(const void* p, int dt, i64 i) {
  if (dt == 0) return nonfiniteWord(static_cast<const unsigned*>(p)[i], 0);
  const unsigned short h = static_cast<const unsigned short*>(p)[i];
  const unsigned m = dt == 1 ? 0x7c00u : 0x7f80u;
  return (h & m) == m;
}

// nonfinite sets *flag = 1 if any element is inf or NaN. A block checks
// one CHUNK of a tensor, 16 bytes a load where the tensor is 16-byte
// aligned (a chunk starts 4096 elements in, so it stays aligned).
extern "C" __global__ void nonfinite(const NFEntry* tab, int ntab, int* flag) {
  const int t = findTensor(tab, ntab, blockIdx.x);
  const NFEntry e = tab[t];
  const i64 start = (i64)(blockIdx.x - e.blockStart) * CHUNK;
  const i64 end = min(e.n, start + CHUNK);
  bool bad = false;
  i64 i = start + threadIdx.x;
  if ((reinterpret_cast<unsigned long long>(e.p) & 15) == 0) {
    const int per = e.dt == 0 ? 4 : 8;  // elements in 16 bytes
    const uint4* q = reinterpret_cast<const uint4*>(e.p);
    const i64 full = start + (end - start) / per * per;
    for (i64 c = start / per + threadIdx.x; c < full / per; c += blockDim.x) {
      const uint4 v = q[c];
      bad |= nonfiniteWord(v.x, e.dt) | nonfiniteWord(v.y, e.dt) | nonfiniteWord(v.z, e.dt) |
             nonfiniteWord(v.w, e.dt);
    }
    i = full + threadIdx.x;
  }
  for (; i < end; i += blockDim.x) bad |= nonfiniteAt(e.p, e.dt, i);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

struct AdamEntry {
  void* p;
  const void* g;
  void* m;
  void* v;
  i64 n;
  int blockStart;
  int pdt, gdt, mdt, vdt;
  int vec;  // every array aligned to 4 elements: adamChunk's vector path
};

struct AdamHP {
  float lr, b1, b2, eps, wd, bc1, bc2, gscale;
};

// adamMath: AdamW with bias correction in the CPU backend's arithmetic on
// one element: g *= gscale; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// p -= lr * ((m/bc1)/(sqrt(v/bc2)+eps) + wd*p), leaving p, m and v in fp32
// (the caller rounds them as it stores). Every operation is an explicitly
// rounded intrinsic so that nvcc cannot contract a multiply and an add into
// an FMA: the result is then the CPU's bit for bit, and a Gemini chunk whose
// Adam runs on the host (under a device budget) ends exactly where it would
// have on the device. Both the scalar and the vector path call it, so they
// cannot drift apart.
__device__ __forceinline__ void adamMath(float& p, float g, float& m, float& v, const AdamHP& hp) {
  const float omb1 = __fsub_rn(1.f, hp.b1), omb2 = __fsub_rn(1.f, hp.b2);
  const float gi = __fmul_rn(g, hp.gscale);
  m = __fadd_rn(__fmul_rn(hp.b1, m), __fmul_rn(omb1, gi));
  v = __fadd_rn(__fmul_rn(hp.b2, v), __fmul_rn(__fmul_rn(omb2, gi), gi));
  const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(v, hp.bc2)), hp.eps);
  const float update = __fadd_rn(__fdiv_rn(__fdiv_rn(m, hp.bc1), denom), __fmul_rn(hp.wd, p));
  p = __fsub_rn(p, __fmul_rn(hp.lr, update));
}

// Half bits to float and back (dt 1 fp16, 2 bf16), for the packed accesses.
__device__ __forceinline__ float h2f(int dt, unsigned bits) {
  const unsigned short b = (unsigned short)bits;
  return dt == 1 ? __half2float(__ushort_as_half(b)) : __bfloat162float(__ushort_as_bfloat16(b));
}

__device__ __forceinline__ unsigned f2h(int dt, float x) {
  return dt == 1 ? __half_as_ushort(__float2half_rn(x)) : __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// ld4 and st4 access elements i..i+3 in one instruction: 16 bytes of fp32 or
// 8 of fp16/bf16. i must be a multiple of 4 and p aligned to 4 elements
// (the host's vec flag); element i is the lowest-addressed (little endian).
__device__ __forceinline__ float4 ld4(const void* p, int dt, i64 i) {
  if (dt == 0) return static_cast<const float4*>(p)[i >> 2];
  const uint2 u = static_cast<const uint2*>(p)[i >> 2];
  return make_float4(h2f(dt, u.x), h2f(dt, u.x >> 16), h2f(dt, u.y), h2f(dt, u.y >> 16));
}

__device__ __forceinline__ void st4(void* p, int dt, i64 i, float4 v) {
  if (dt == 0) {
    static_cast<float4*>(p)[i >> 2] = v;
    return;
  }
  static_cast<uint2*>(p)[i >> 2] = make_uint2(f2h(dt, v.x) | f2h(dt, v.y) << 16, f2h(dt, v.z) | f2h(dt, v.w) << 16);
}

// adamScalar updates element i of e's tensor and returns its new p, as
// stored (rounded to pdt). Every load precedes every store.
template <typename E>
__device__ __forceinline__ float adamScalar(const E& e, i64 i, const AdamHP& hp) {
  float p = ld(e.p, e.pdt, i), m = ld(e.m, e.mdt, i), v = ld(e.v, e.vdt, i);
  adamMath(p, ld(e.g, e.gdt, i), m, v, hp);
  st(e.m, e.mdt, i, m);
  st(e.v, e.vdt, i, v);
  st(e.p, e.pdt, i, p);
  return rnd(e.pdt, p);
}

// adamVec is adamScalar of elements i..i+3 with one access per array: all
// four loads are issued before any store, so that they overlap in flight
// (a store through one pointer could alias a later load through another, so
// nvcc would not reorder them itself).
template <typename E>
__device__ __forceinline__ float4 adamVec(const E& e, i64 i, const AdamHP& hp) {
  float4 p = ld4(e.p, e.pdt, i), m = ld4(e.m, e.mdt, i), v = ld4(e.v, e.vdt, i);
  const float4 g = ld4(e.g, e.gdt, i);
  adamMath(p.x, g.x, m.x, v.x, hp);
  adamMath(p.y, g.y, m.y, v.y, hp);
  adamMath(p.z, g.z, m.z, v.z, hp);
  adamMath(p.w, g.w, m.w, v.w, hp);
  st4(e.m, e.mdt, i, m);
  st4(e.v, e.vdt, i, v);
  st4(e.p, e.pdt, i, p);
  return make_float4(rnd(e.pdt, p.x), rnd(e.pdt, p.y), rnd(e.pdt, p.z), rnd(e.pdt, p.w));
}

struct AdamCopyEntry {
  void* p;
  const void* g;
  void* m;
  void* v;
  void* c;
  i64 n;
  int blockStart;
  int pdt, gdt, mdt, vdt, cdt;
  int vec;  // as AdamEntry's; c (when not null) aligned too
  int pad;
};

// copyOut writes the new p (as stored) rounded to cdt into the copy, where
// the entry has one: nothing for adam's entries.
__device__ __forceinline__ void copyOut(const AdamEntry&, i64, float) {}
__device__ __forceinline__ void copyOut(const AdamEntry&, i64, float4) {}
__device__ __forceinline__ void copyOut(const AdamCopyEntry& e, i64 i, float p) {
  if (e.c != nullptr) st(e.c, e.cdt, i, p);
}
__device__ __forceinline__ void copyOut(const AdamCopyEntry& e, i64 i, float4 p) {
  if (e.c != nullptr) st4(e.c, e.cdt, i, p);
}

// adamChunk updates this block's CHUNK elements of its tensor: 4 per thread
// and step where e.vec, then one per thread for the rest (the last 1-3
// elements of a vec tensor, all of an unaligned one such as a view into a
// chunk at an offset that is no multiple of 4 elements). A chunk starts at
// a multiple of CHUNK, so the vector indices stay multiples of 4.
template <typename E>
__device__ __forceinline__ void adamChunk(const E* tab, int ntab, const AdamHP& hp) {
  const int t = findTensor(tab, ntab, blockIdx.x);
  const E e = tab[t];
  const i64 start = (i64)(blockIdx.x - e.blockStart) * CHUNK;
  const i64 end = min(e.n, start + CHUNK);
  i64 scalarFrom = start;
  if (e.vec) {
    scalarFrom = start + ((end - start) & ~(i64)3);
    for (i64 i = start + 4 * (i64)threadIdx.x; i < scalarFrom; i += 4 * (i64)blockDim.x)
      copyOut(e, i, adamVec(e, i, hp));
  }
  for (i64 i = scalarFrom + threadIdx.x; i < end; i += blockDim.x) copyOut(e, i, adamScalar(e, i, hp));
}

extern "C" __global__ void adam(const AdamEntry* tab, int ntab, AdamHP hp) { adamChunk(tab, ntab, hp); }

// adam_copy is adam that also writes each updated parameter, as stored,
// rounded to cdt into c (skipped where c is null): the fp16/bf16 model
// weights of mixed precision in the same pass, instead of one convert
// launch per tensor afterwards.
extern "C" __global__ void adam_copy(const AdamCopyEntry* tab, int ntab, AdamHP hp) { adamChunk(tab, ntab, hp); }

// conv_taps moves a convolution's weights between the full R x S taps and
// the window of taps [r0, r0+Rw) x [s0, s0+Sw) that ever meet an input pixel
// (ops_conv.go's tapWindow). toFull = 0 slices src [kc, R, S] into dst
// [kc, Rw, Sw]; toFull = 1 scatters src [kc, Rw, Sw] into the window's
// taps of dst [kc, R, S], whose other taps the host has zeroed (their
// weight gradient is exactly zero; a memset writes them at full
// bandwidth). Copies are exact: same dtype in and out. A thread per
// window element, with 32-bit index arithmetic (the host checks that
// weights have fewer than 2^31 elements): 64-bit divisions made it several
// times slower.
extern "C" __global__ void conv_taps(void* dst, const void* src, int dt, int kc, int R, int S, int r0, int s0,
                                     int Rw, int Sw, int toFull) {
  const int RS = R * S, RSw = Rw * Sw, n = kc * RSw;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int k = i / RSw, rs = i - k * RSw, r = rs / Sw + r0, sx = rs % Sw + s0;
    const int f = k * RS + r * S + sx;
    if (toFull) st(dst, dt, f, ld(src, dt, i));
    else st(dst, dt, i, ld(src, dt, f));
  }
}

// conv_flip turns a convolution's weights src [K, C, R, S] into those of
// its stride-1 data gradient as a forward convolution over the window of
// taps [r0, r0+Rw) x [s0, s0+Sw) (all taps: r0 = s0 = 0, Rw = R, Sw = S):
// dst [C, K, Rw, Sw] with every kernel rotated by 180 degrees,
// dst[c,k,r,s] = src[k,c,r0+Rw-1-r,s0+Sw-1-s]. Exact: same dtype in and
// out. A thread per element of dst, 32-bit indices as conv_taps.
extern "C" __global__ void conv_flip(void* dst, const void* src, int dt, int K, int C, int R, int S, int r0, int s0,
                                     int Rw, int Sw) {
  const int RSw = Rw * Sw, n = K * C * RSw;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int ck = i / RSw, t = RSw - 1 - (i - ck * RSw), c = ck / K, k = ck - c * K;
    const int r = t / Sw + r0, sx = t % Sw + s0;
    st(dst, dt, i, ld(src, dt, ((k * C + c) * R + r) * S + sx));
  }
}
