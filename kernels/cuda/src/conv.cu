// Convolution as implicit GEMM for the resnetlab CUDA backend.
//
// One templated kernel computes all three convolution GEMMs without
// materialising im2col: operands are gathered from the NCHW tensors while a
// 64x64x32 tile is staged in shared memory.
//   FWD : y[n,k,p,q]  = sum_{c,r,s} x[n,c,p*st-pad+r,q*st-pad+s] w[k,c,r,s]
//         M = N*P*Q, N = K, reduction = C*R*S
//   BWDD: dx[n,c,h,w] = sum_{k,r,s} dy[n,k,(h+pad-r)/st,(w+pad-s)/st] w[k,c,r,s]
//         M = N*H*W, N = C, reduction = K*R*S (terms with a fractional or
//         out-of-range output index are zero)
//   BWDW: dw[k,c,r,s] = sum_{n,p,q} dy[n,k,p,q] x[n,c,p*st-pad+r,q*st-pad+s]
//         M = K, N = C*R*S, reduction = N*P*Q
// Precisions: PF32 is plain fp32 FMA (exact), PTF32 uses TF32 tensor cores on
// fp32 storage, PF16/PBF16 use fp16/bf16 tensor cores. Accumulation is
// always fp32.
// Loaders: fp32/tf32 elements go through fp32 (tf32 rounds on the store);
// fp16/bf16 elements move as they are, and the _vec entries also load 8
// contiguous elements
// (16 bytes) at once where the operand is contiguous along the reduction:
// the weights in FWD (needs C*R*S % 8 == 0) and dy in BWDW (needs P*Q % 8
// == 0), both 16-byte aligned (the host checks and picks the entry). With gridDim.z > 1 the reduction is split: each split writes
// fp32 partials in output layout to ws and splitk_reduce sums them in split
// order, so results are deterministic.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

struct ConvShape {
  int N, C, H, W, K, R, S, P, Q, stride, pad;
};

enum { FWD = 0, BWDD = 1, BWDW = 2 };
enum { PF32 = 0, PTF32 = 1, PF16 = 2, PBF16 = 3 };

#define BM 64
#define BN 64
#define BK 32
#define NT 128
#define LDC (BM + 4)
#define INVALID (-(1 << 28))

template <bool B, class T, class F> struct cond { typedef T type; };
template <class T, class F> struct cond<false, T, F> { typedef F type; };

template <int PREC> struct Prec;
template <> struct Prec<PF32> { typedef float T; typedef float F; enum { PAD = 4, KS = 8 }; };
template <> struct Prec<PTF32> { typedef float T; typedef wmma::precision::tf32 F; enum { PAD = 4, KS = 8 }; };
template <> struct Prec<PF16> { typedef __half T; typedef __half F; enum { PAD = 8, KS = 16 }; };
template <> struct Prec<PBF16> { typedef __nv_bfloat16 T; typedef __nv_bfloat16 F; enum { PAD = 8, KS = 16 }; };

__device__ __forceinline__ float toF(float v) { return v; }
__device__ __forceinline__ float toF(__half v) { return __half2float(v); }
__device__ __forceinline__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T fromF(float v);
template <> __device__ __forceinline__ float fromF<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromF<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

__device__ __forceinline__ float ldAny(const void* p, int dt, long long i) {
  if (dt == 0) return static_cast<const float*>(p)[i];
  if (dt == 1) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ __forceinline__ void stAny(void* p, int dt, long long i, float v) {
  if (dt == 0) static_cast<float*>(p)[i] = v;
  else if (dt == 1) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// divStride returns t/st for the strides ResNet uses without a division.
__device__ __forceinline__ int divStride(int t, int st) {
  if (st == 1) return t;
  if (st == 2) return t >> 1;
  return t / st;
}

template <int MODE>
__device__ __forceinline__ void gemmDims(const ConvShape& s, int& Mg, int& Ng, int& Kg) {
  if (MODE == FWD) { Mg = s.N * s.P * s.Q; Ng = s.K; Kg = s.C * s.R * s.S; }
  else if (MODE == BWDD) { Mg = s.N * s.H * s.W; Ng = s.C; Kg = s.K * s.R * s.S; }
  else { Mg = s.K; Ng = s.C * s.R * s.S; Kg = s.N * s.P * s.Q; }
}

// mEntry decodes GEMM row m once per block: {gather base, h0, w0, output base}.
template <int MODE>
__device__ __forceinline__ int4 mEntry(const ConvShape& s, int m, int Mg, int Ng) {
  if (m >= Mg) return make_int4(0, INVALID, INVALID, 0);
  if (MODE == FWD) {
    int PQ = s.P * s.Q, nb = m / PQ, pq = m - nb * PQ, p = pq / s.Q, q = pq - p * s.Q;
    int h0 = p * s.stride - s.pad, w0 = q * s.stride - s.pad;
    return make_int4(nb * s.C * s.H * s.W + h0 * s.W + w0, h0, w0, nb * s.K * PQ + pq);
  } else if (MODE == BWDD) {
    int HW = s.H * s.W, nb = m / HW, hw = m - nb * HW, h = hw / s.W, w = hw - h * s.W;
    return make_int4(nb * s.K * s.P * s.Q, h + s.pad, w + s.pad, nb * s.C * HW + hw);
  }
  return make_int4(0, 0, 0, m * Ng);
}

// nEntry decodes GEMM column n (BWDW only): {x offset of (c,r,s), r, s}.
__device__ __forceinline__ int4 nEntry(const ConvShape& s, int n, int Ng) {
  if (n >= Ng) return make_int4(0, INVALID, INVALID, 0);
  int RS = s.R * s.S, c = n / RS, rs = n - c * RS, r = rs / s.S, sx = rs - r * s.S;
  return make_int4(c * s.H * s.W + r * s.W + sx, r, sx, 0);
}

// kEntry decodes reduction index kk once per k-tile. FWD: {x offset of
// (c, r, s), its tap as a 64-bit one-hot (low word, high word; none past
// Kg)}; BWDD: {dy offset of (k, -r/st, -s/st), the tap's one-hot, w offset
// of (k, r, s)}; BWDW: {x offset of (nb, h0, w0), h0, w0, dy offset of
// (nb, p, q)}.
template <int MODE>
__device__ __forceinline__ int4 kEntry(const ConvShape& s, int kk, int Kg) {
  if (MODE == FWD) {
    if (kk >= Kg) return make_int4(0, 0, 0, 0);
    int RS = s.R * s.S, c = kk / RS, rs = kk - c * RS, r = rs / s.S, sx = rs - r * s.S;
    return make_int4(c * s.H * s.W + r * s.W + sx, rs < 32 ? (int)(1u << rs) : 0, rs < 32 ? 0 : (int)(1u << (rs - 32)), 0);
  } else if (MODE == BWDD) {
    if (kk >= Kg) return make_int4(0, 0, 0, 0);
    int RS = s.R * s.S, k = kk / RS, rs = kk - k * RS, r = rs / s.S, sx = rs - r * s.S;
    return make_int4(k * s.P * s.Q - divStride(r, s.stride) * s.Q - divStride(sx, s.stride),
                     rs < 32 ? (int)(1u << rs) : 0, rs < 32 ? 0 : (int)(1u << (rs - 32)), k * s.C * RS + rs);
  }
  if (kk >= Kg) return make_int4(0, INVALID, INVALID, 0);
  int PQ = s.P * s.Q, nb = kk / PQ, pq = kk - nb * PQ, p = pq / s.Q, q = pq - p * s.Q;
  int h0 = p * s.stride - s.pad, w0 = q * s.stride - s.pad;
  return make_int4(nb * s.C * s.H * s.W + h0 * s.W + w0, h0, w0, nb * s.K * PQ + pq);
}

// tapMask is the set of taps (bit r*S+s) of the window at (h0, w0) that
// land inside the H x W map, none where h0 is INVALID. The host keeps
// R*S <= 64.
__device__ __forceinline__ unsigned long long tapMask(const ConvShape& s, int h0, int w0) {
  if (h0 == INVALID) return 0ull;
  unsigned long long cols = 0ull, m = 0ull;
  for (int x = 0; x < s.S; x++)
    if ((unsigned)(w0 + x) < (unsigned)s.W) cols |= 1ull << x;
  for (int r = 0; r < s.R; r++)
    if ((unsigned)(h0 + r) < (unsigned)s.H) m |= cols << (r * s.S);
  return m;
}

// dgradMask is the set of taps (bit r*S+s) through which dx at (hp - pad,
// wp - pad) meets an output element: hp - r and wp - s are multiples of
// the stride inside the P x Q map. For those taps (hp - r) / st is
// hp / st - r / st, so a tap's dy offset is the row's base plus the
// tap's own offset (kEntry). None where hp is INVALID.
__device__ __forceinline__ unsigned long long dgradMask(const ConvShape& s, int hp, int wp) {
  if (hp == INVALID) return 0ull;
  unsigned long long cols = 0ull, m = 0ull;
  for (int x = 0; x < s.S; x++) {
    const int t = wp - x, q = divStride(t, s.stride);
    if (t >= 0 && q * s.stride == t && q < s.Q) cols |= 1ull << x;
  }
  for (int r = 0; r < s.R; r++) {
    const int t = hp - r, p = divStride(t, s.stride);
    if (t >= 0 && p * s.stride == t && p < s.P) m |= cols << (r * s.S);
  }
  return m;
}

// stageVal is an element as the tile holds it: TF32 rounds fp32 here.
template <int PREC, class T>
__device__ __forceinline__ T stageVal(T v) {
  if constexpr (PREC == PTF32) return wmma::__float_to_tf32(v);
  else return v;
}

__device__ __forceinline__ unsigned short bitsOf(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ unsigned short bitsOf(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }

// storeRow16 stores 16 consecutive elements of a tile row (16-byte aligned).
template <int PREC, class T>
__device__ __forceinline__ void storeRow16(T* dst, const T (&v)[16]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; i++)
      reinterpret_cast<float4*>(dst)[i] = make_float4(stageVal<PREC>(v[4 * i]), stageVal<PREC>(v[4 * i + 1]),
                                                      stageVal<PREC>(v[4 * i + 2]), stageVal<PREC>(v[4 * i + 3]));
  } else {
    unsigned w[8];
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = bitsOf(v[2 * i]) | ((unsigned)bitsOf(v[2 * i + 1]) << 16);
    reinterpret_cast<uint4*>(dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
    reinterpret_cast<uint4*>(dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
  }
}

// The gathered operand (FWD's A = x, BWDD's A = dy, BWDW's B = x) gives
// each thread one tile row (tid % 64: an output position in FWD, an input
// position in BWDD, a (c, r, s) column in BWDW) and 16 consecutive k of it,
// so that a tap's validity is one AND of 64-bit masks (FWD/BWDD: the row's
// valid taps and the k's tap; BWDW: the k's valid taps and the row's tap)
// and the row is stored with 16-byte stores. The other operands keep a
// fixed k per thread. Both tiles are (row, k) with k fastest.
#define MAXPQ 256  // BWDW: output maps up to this size keep their tap masks in a table
template <int MODE, int PREC, bool VEC = false>
__device__ __forceinline__ void convGemm(const ConvShape s, const typename Prec<PREC>::T* __restrict__ ga,
                                         const typename Prec<PREC>::T* __restrict__ gb,
                                         typename Prec<PREC>::T* __restrict__ out, float* __restrict__ ws,
                                         const void* bias, int bdt, int tilesPerSplit, int outLen) {
  typedef typename Prec<PREC>::T T;
  constexpr int PAD = Prec<PREC>::PAD;
  constexpr int LDA = BK + PAD, LDB = BK + PAD;
  constexpr int AEL = BM * LDA;
  constexpr int BEL = BN * LDB;
  constexpr int TILE_BYTES = (AEL + BEL) * (int)sizeof(T);
  constexpr int C_BYTES = BN * LDC * 4;
  constexpr int SMEM = TILE_BYTES > C_BYTES ? TILE_BYTES : C_BYTES;
  static_assert(BM == BN && NT == 2 * BM && BK == 32, "the row gather covers a 64 x 32 tile with 128 threads");

  __shared__ __align__(128) unsigned char smem[SMEM];
  __shared__ int4 mtab[BM];
  __shared__ int4 ktab[2][BK];  // double-buffered: tile t uses ktab[t & 1]
  __shared__ int4 gtab[2][BK];  // the row gather's {x offset, mask low, mask high} per k
  __shared__ unsigned long long pqMask[MAXPQ];  // BWDW: the valid taps of each output position
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + AEL;
  float* Cs = reinterpret_cast<float*>(smem);

  const int tid = threadIdx.x;
  int Mg, Ng, Kg;
  gemmDims<MODE>(s, Mg, Ng, Kg);
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int kTiles = (Kg + BK - 1) / BK;
  const int kt0 = blockIdx.z * tilesPerSplit;
  const int kt1 = min(kTiles, kt0 + tilesPerSplit);
  const int PQ = s.P * s.Q, RS = s.R * s.S;

  auto fillK = [&](int t) {
    if (tid < BK) {
      const int kk = t * BK + tid;
      const int4 e = kEntry<MODE>(s, kk, Kg);
      if constexpr (MODE != BWDW) {
        gtab[t & 1][tid] = e;
      } else {
        ktab[t & 1][tid] = e;
        unsigned long long m = 0ull;
        if (kk < Kg) m = PQ <= MAXPQ ? pqMask[kk % PQ] : tapMask(s, e.y, e.z);
        gtab[t & 1][tid] = make_int4(e.x, (int)(unsigned)m, (int)(unsigned)(m >> 32), 0);
      }
    }
  };
  if (tid < BM) mtab[tid] = mEntry<MODE>(s, m0 + tid, Mg, Ng);
  if constexpr (MODE == BWDW) {
    if (PQ <= MAXPQ) {
      for (int i = tid; i < PQ; i += NT) {
        const int p = i / s.Q, q = i - p * s.Q;
        pqMask[i] = tapMask(s, p * s.stride - s.pad, q * s.stride - s.pad);
      }
      __syncthreads();
    }
  }
  fillK(kt0);
  __syncthreads();

  T g[16], ra[16], rb[16];
  uint4 va[2], vb[2];  // VEC: 8 contiguous 2-byte elements each
  static_assert(!VEC || sizeof(T) == 2, "16-byte loads are for fp16/bf16");
  const T zero = fromF<T>(0.f);
  // The row gather: the thread's row, its first k in the tile, the row's
  // base in x or dy and its mask (FWD/BWDD: its valid taps; BWDW: its tap;
  // none for a row past the GEMM).
  const int gRow = tid % BM, gK0 = (tid / BM) * 16;
  const T* gp = (MODE == BWDW) ? gb : ga;
  unsigned long long gMask = 0ull;
  if constexpr (MODE == FWD) {
    const int4 mt = mtab[gRow];
    gp += mt.x;
    gMask = tapMask(s, mt.y, mt.z);
  } else if constexpr (MODE == BWDD) {
    const int4 mt = mtab[gRow];
    if (mt.y != INVALID) {
      gp += mt.x + divStride(mt.y, s.stride) * s.Q + divStride(mt.z, s.stride);
      gMask = dgradMask(s, mt.y, mt.z);
    }
  } else {
    const int4 nt = nEntry(s, n0 + gRow, Ng);
    if (nt.y != INVALID) gp += nt.x, gMask = 1ull << (nt.y * s.S + nt.z);
  }
  const unsigned gLo = (unsigned)gMask, gHi = (unsigned)(gMask >> 32);
  // gatherRow loads the thread's 16 elements of tile t's row.
  auto gatherRow = [&](int t) {
    const int4* e = gtab[t & 1] + gK0;
#pragma unroll
    for (int j = 0; j < 16; j++) {
      const int4 x = e[j];
      g[j] = (((unsigned)x.y & gLo) | ((unsigned)x.z & gHi)) ? gp[x.x] : zero;
    }
  };
  // The fixed-k operands: BWDW's scalar A (dy), FWD's and BWDD's scalar B
  // (w).
  const int aFix = tid % BK, aVar0 = tid / BK;
  constexpr int aStep = NT / BK;
  const int bk = tid % BK, bn0 = tid / BK;
  constexpr int bStep = NT / BK;

  auto loadTile = [&](int t) {
    const int k0 = t * BK;
    const int4* kb = ktab[t & 1];
    // A
    if constexpr (MODE != BWDW) {
      gatherRow(t);
    } else if constexpr (VEC && MODE == BWDW) {
      // dy rows: 64 m x 32 k = 256 chunks of 8, two per thread; a chunk
      // never crosses an image (P*Q % 8 == 0) nor Kg (a multiple of P*Q).
#pragma unroll
      for (int jj = 0; jj < 2; jj++) {
        int c = tid + jj * NT, m = m0 + (c >> 2);
        int4 kt = kb[(c & 3) * 8];
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (m < Mg && kt.y != INVALID) v = *reinterpret_cast<const uint4*>(ga + kt.w + m * PQ);
        va[jj] = v;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 16; j++) {
        T v = zero;
        int m = m0 + aVar0 + j * aStep;
        int4 kt = kb[aFix];
        if (m < Mg && kt.y != INVALID) v = ga[kt.w + m * PQ];
        ra[j] = v;
      }
    }
    // B
    if constexpr (MODE == BWDW) {
      gatherRow(t);
    } else if constexpr (VEC && MODE == FWD) {
      // weight rows: 64 n x 32 k = 256 chunks of 8, two per thread; a
      // chunk is wholly inside or outside Kg (a multiple of 8).
#pragma unroll
      for (int jj = 0; jj < 2; jj++) {
        int c = tid + jj * NT, n = n0 + (c >> 2), kk = k0 + (c & 3) * 8;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (n < Ng && kk < Kg) v = *reinterpret_cast<const uint4*>(gb + (long long)n * Kg + kk);
        vb[jj] = v;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 16; j++) {
        T v = zero;
        int n = n0 + bn0 + j * bStep, kk = k0 + bk;
        if constexpr (MODE == FWD) {
          if (n < Ng && kk < Kg) v = gb[n * Kg + kk];
        } else {
          if (n < Ng && kk < Kg) v = gb[gtab[t & 1][bk].w + n * RS];
        }
        rb[j] = v;
      }
    }
  };
  auto storeTile = [&]() {
    if constexpr (MODE != BWDW) {
      storeRow16<PREC>(As + gRow * LDA + gK0, g);  // (m, k) rows
    } else if constexpr (VEC && MODE == BWDW) {
#pragma unroll
      for (int jj = 0; jj < 2; jj++) {
        int c = tid + jj * NT;
        *reinterpret_cast<uint4*>(As + (c >> 2) * LDA + (c & 3) * 8) = va[jj];  // (m, k) rows
      }
    } else {
#pragma unroll
      for (int j = 0; j < 16; j++) As[(aVar0 + j * aStep) * LDA + aFix] = stageVal<PREC>(ra[j]);
    }
    if constexpr (MODE == BWDW) {
      storeRow16<PREC>(Bs + gRow * LDB + gK0, g);  // (n, k) rows
    } else if constexpr (VEC && MODE == FWD) {
#pragma unroll
      for (int jj = 0; jj < 2; jj++) {
        int c = tid + jj * NT;
        *reinterpret_cast<uint4*>(Bs + (c >> 2) * LDB + (c & 3) * 8) = vb[jj];
      }
    } else {
#pragma unroll
      for (int j = 0; j < 16; j++) Bs[(bn0 + j * bStep) * LDB + bk] = stageVal<PREC>(rb[j]);
    }
  };
  // A(m,k) in shared memory for the SIMT path.
  auto aAt = [&](int m, int k) -> float { return toF(As[m * LDA + k]); };

  const int warp = tid >> 5, wm = warp & 1, wn = warp >> 1;
  constexpr int KS = Prec<PREC>::KS;
  // The accumulator fragment type is valid for every precision; the SIMT
  // path keeps its own registers instead.
  wmma::fragment<wmma::accumulator, 16, 16, (PREC == PF32 ? 8 : KS), float> acc[2][2];
  float sacc[8][4];
  const int tx = tid % 16, ty = tid / 16;
  if constexpr (PREC == PF32) {
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) sacc[i][j] = 0.f;
  } else {
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.f);
  }

  if (kt0 < kt1) loadTile(kt0);
  for (int t = kt0; t < kt1; t++) {
    storeTile();
    // The other buffer's last reader was loadTile(t - 1), before the
    // previous iteration's closing barrier.
    if (t + 1 < kt1) fillK(t + 1);
    __syncthreads();
    if (t + 1 < kt1) loadTile(t + 1);
    if constexpr (PREC == PF32) {
#pragma unroll 4
      for (int k = 0; k < BK; k++) {
        float a[8], b[4];
#pragma unroll
        for (int i = 0; i < 8; i++) a[i] = aAt(ty * 8 + i, k);
#pragma unroll
        for (int j = 0; j < 4; j++) b[j] = toF(Bs[(tx * 4 + j) * LDB + k]);
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
          for (int j = 0; j < 4; j++) sacc[i][j] = fmaf(a[i], b[j], sacc[i][j]);
      }
    } else {
      typedef typename Prec<PREC>::F F;
#pragma unroll
      for (int kq = 0; kq < BK; kq += KS) {
        wmma::fragment<wmma::matrix_a, 16, 16, KS, F, wmma::row_major> fa[2];
        wmma::fragment<wmma::matrix_b, 16, 16, KS, F, wmma::col_major> fb[2];
#pragma unroll
        for (int i = 0; i < 2; i++) wmma::load_matrix_sync(fa[i], As + (wm * 32 + i * 16) * LDA + kq, LDA);
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::load_matrix_sync(fb[j], Bs + (wn * 32 + j * 16) * LDB + kq, LDB);
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
          for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
    }
    __syncthreads();
  }

  // Epilogue: accumulators -> Cs (m-fastest for FWD/BWDD, n-fastest for
  // BWDW, matching the output layout) -> global memory.
  constexpr bool OM = (MODE != BWDW);
  if constexpr (PREC == PF32) {
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        int mm = ty * 8 + i, nn = tx * 4 + j;
        Cs[OM ? nn * LDC + mm : mm * LDC + nn] = sacc[i][j];
      }
  } else {
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int j = 0; j < 2; j++) {
        int mm = wm * 32 + i * 16, nn = wn * 32 + j * 16;
        if (OM) wmma::store_matrix_sync(Cs + nn * LDC + mm, acc[i][j], LDC, wmma::mem_col_major);
        else wmma::store_matrix_sync(Cs + mm * LDC + nn, acc[i][j], LDC, wmma::mem_row_major);
      }
  }
  __syncthreads();
  // A thread keeps one row (FWD/BWDD: m = tid % 64, every other column) or
  // one column (BWDW: n = tid % 64, every other row), so its output
  // offsets advance by a constant stride.
  float* wz = ws ? ws + (long long)blockIdx.z * outLen : nullptr;
  const int fixed = tid % BM, var0 = tid / BM;
  if constexpr (OM) {
    const int nstride = (MODE == FWD) ? PQ : s.H * s.W;
    if (m0 + fixed < Mg) {
      const int base = mtab[fixed].w + n0 * nstride, nEnd = min(BN, Ng - n0);
#pragma unroll 4
      for (int ni = var0; ni < nEnd; ni += NT / BM) {
        float v = Cs[ni * LDC + fixed];
        const int oi = base + ni * nstride;
        if (wz) {
          wz[oi] = v;
        } else {
          if (bias) v += ldAny(bias, bdt, n0 + ni);
          out[oi] = fromF<T>(v);
        }
      }
    }
  } else {
    const int n = n0 + fixed, mEnd = min(BM, Mg - m0);
    if (n < Ng) {
#pragma unroll 4
      for (int mi = var0; mi < mEnd; mi += NT / BN) {
        float v = Cs[mi * LDC + fixed];
        const int oi = (m0 + mi) * Ng + n;
        if (wz) {
          wz[oi] = v;
        } else {
          if (bias) v += ldAny(bias, bdt, n);
          out[oi] = fromF<T>(v);
        }
      }
    }
  }
}

// fp32/tf32 entries and fp16/bf16 entries without and with 16-byte loads
// (VEC: the host checks alignment and shape and picks the _vec entry).
#define CONV_ENTRY(name, MODE, PREC, VEC)                                                                    \
  extern "C" __global__ void __launch_bounds__(NT)                                                          \
      name(ConvShape s, const void* a, const void* b, void* out, float* ws, const void* bias, int bdt,     \
           int tilesPerSplit, int outLen) {                                                                 \
    typedef Prec<PREC>::T T;                                                                                \
    convGemm<MODE, PREC, VEC>(s, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), \
                              ws, bias, bdt, tilesPerSplit, outLen);                                        \
  }

CONV_ENTRY(conv_fwd_f32, FWD, PF32, false)
CONV_ENTRY(conv_fwd_tf32, FWD, PTF32, false)
CONV_ENTRY(conv_fwd_f16, FWD, PF16, false)
CONV_ENTRY(conv_fwd_bf16, FWD, PBF16, false)
CONV_ENTRY(conv_bwdd_f32, BWDD, PF32, false)
CONV_ENTRY(conv_bwdd_tf32, BWDD, PTF32, false)
CONV_ENTRY(conv_bwdd_f16, BWDD, PF16, false)
CONV_ENTRY(conv_bwdd_bf16, BWDD, PBF16, false)
CONV_ENTRY(conv_bwdw_f32, BWDW, PF32, false)
CONV_ENTRY(conv_bwdw_tf32, BWDW, PTF32, false)
CONV_ENTRY(conv_bwdw_f16, BWDW, PF16, false)
CONV_ENTRY(conv_bwdw_bf16, BWDW, PBF16, false)
CONV_ENTRY(conv_fwd_f16_vec, FWD, PF16, true)
CONV_ENTRY(conv_fwd_bf16_vec, FWD, PBF16, true)
CONV_ENTRY(conv_bwdw_f16_vec, BWDW, PF16, true)
CONV_ENTRY(conv_bwdw_bf16_vec, BWDW, PBF16, true)

// ---- Dense GEMMs: convolutions whose operands need no gather ----
// When the output map is 1x1 and the window is the whole input map (pad 0),
// every mode is a plain GEMM out[M][N] on row-major operands (the host's
// denseShape): FWD A = x [M=N][K=C*R*S], B = w [N=K][K]; BWDD A = dy
// [M=N][K=K], B = w [K][N=C*R*S]; BWDW A = dy [K=N][M=K], B = x [K][N].
// Both operands then move in 16-byte chunks along their contiguous axis
// (AK: A's k, else m; BK: B's k, else n), which the gather kernel cannot do
// on these maps: its m-fastest gathers and stores are a sector per element
// there. The output is row-major [M][N] (y, dx and dw alike); split-K and
// its partials in ws work as in convGemm.
template <bool AK, bool BK_, int PREC>
__device__ __forceinline__ void denseGemm(int M, int N, int K, const typename Prec<PREC>::T* __restrict__ ga,
                                          const typename Prec<PREC>::T* __restrict__ gb,
                                          typename Prec<PREC>::T* __restrict__ out, float* __restrict__ ws,
                                          const void* bias, int bdt, int tilesPerSplit, int outLen) {
  typedef typename Prec<PREC>::T T;
  static_assert(PREC != PF32, "the dense path is for tensor-core precisions");
  constexpr int PAD = Prec<PREC>::PAD;
  constexpr int EPC = 16 / (int)sizeof(T);  // elements per 16-byte chunk
  constexpr int LDA = AK ? (BK + PAD) : (BM + PAD);
  constexpr int LDB = BK_ ? (BK + PAD) : (BN + PAD);
  constexpr int AEL = AK ? BM * LDA : BK * LDA;
  constexpr int BEL = BK_ ? BN * LDB : BK * LDB;
  constexpr int TILE_BYTES = (AEL + BEL) * (int)sizeof(T);
  constexpr int C_BYTES = BM * LDC * 4;
  constexpr int SMEM = TILE_BYTES > C_BYTES ? TILE_BYTES : C_BYTES;
  constexpr int CH = BM * BK / EPC / NT;  // chunks per thread per operand (BM == BN)
  static_assert(BM == BN && CH * NT * EPC == BM * BK, "tile and block sizes");

  __shared__ __align__(128) unsigned char smem[SMEM];
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + AEL;
  float* Cs = reinterpret_cast<float*>(smem);
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int kTiles = (K + BK - 1) / BK;
  const int kt0 = blockIdx.z * tilesPerSplit;
  const int kt1 = min(kTiles, kt0 + tilesPerSplit);

  // Chunk j of a thread: in a k-contiguous tile (rows of BK) row c / (BK /
  // EPC) at k offset (c % (BK / EPC)) * EPC; in an m/n-contiguous tile (rows
  // of 64) k row c / (64 / EPC) at offset (c % (64 / EPC)) * EPC. The
  // contiguous extent is a multiple of EPC, so a chunk is wholly in or out.
  uint4 va[CH], vb[CH];
  auto loadOp = [&](const T* g, bool kc, int rows0, int rowsN, int k0, uint4* v) {
#pragma unroll
    for (int j = 0; j < CH; j++) {
      const int c = tid + j * NT;
      uint4 x = make_uint4(0u, 0u, 0u, 0u);
      if (kc) {
        const int r = c / (BK / EPC), kk = k0 + (c % (BK / EPC)) * EPC;
        if (rows0 + r < rowsN && kk < K) x = *reinterpret_cast<const uint4*>(g + (long long)(rows0 + r) * K + kk);
      } else {
        const int kk = k0 + c / (BM / EPC), r = (c % (BM / EPC)) * EPC;
        if (kk < K && rows0 + r < rowsN) x = *reinterpret_cast<const uint4*>(g + (long long)kk * rowsN + rows0 + r);
      }
      v[j] = x;
    }
  };
  auto storeOp = [&](T* S, bool kc, int ld, const uint4* v) {
#pragma unroll
    for (int j = 0; j < CH; j++) {
      const int c = tid + j * NT;
      uint4 x = v[j];
      if constexpr (PREC == PTF32) {
        float* f = reinterpret_cast<float*>(&x);
#pragma unroll
        for (int e = 0; e < 4; e++) f[e] = wmma::__float_to_tf32(f[e]);
      }
      const int off = kc ? (c / (BK / EPC)) * ld + (c % (BK / EPC)) * EPC : (c / (BM / EPC)) * ld + (c % (BM / EPC)) * EPC;
      *reinterpret_cast<uint4*>(S + off) = x;
    }
  };

  const int warp = tid >> 5, wm = warp & 1, wn = warp >> 1;
  typedef typename cond<AK, wmma::row_major, wmma::col_major>::type ALayout;
  typedef typename cond<BK_, wmma::col_major, wmma::row_major>::type BLayout;
  constexpr int KS = Prec<PREC>::KS;
  typedef typename Prec<PREC>::F F;
  wmma::fragment<wmma::accumulator, 16, 16, KS, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.f);

  if (kt0 < kt1) {
    loadOp(ga, AK, m0, M, kt0 * BK, va);
    loadOp(gb, BK_, n0, N, kt0 * BK, vb);
  }
  for (int t = kt0; t < kt1; t++) {
    storeOp(As, AK, LDA, va);
    storeOp(Bs, BK_, LDB, vb);
    __syncthreads();
    if (t + 1 < kt1) {
      loadOp(ga, AK, m0, M, (t + 1) * BK, va);
      loadOp(gb, BK_, n0, N, (t + 1) * BK, vb);
    }
#pragma unroll
    for (int kq = 0; kq < BK; kq += KS) {
      wmma::fragment<wmma::matrix_a, 16, 16, KS, F, ALayout> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, KS, F, BLayout> fb[2];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const int mm = wm * 32 + i * 16;
        wmma::load_matrix_sync(fa[i], AK ? As + mm * LDA + kq : As + kq * LDA + mm, LDA);
      }
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const int nn = wn * 32 + j * 16;
        wmma::load_matrix_sync(fb[j], BK_ ? Bs + nn * LDB + kq : Bs + kq * LDB + nn, LDB);
      }
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Epilogue: row-major through Cs, n fastest, so that each warp's stores
  // are contiguous; a thread keeps one column (n = tid % 64) and every
  // other row.
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++)
      wmma::store_matrix_sync(Cs + (wm * 32 + i * 16) * LDC + wn * 32 + j * 16, acc[i][j], LDC, wmma::mem_row_major);
  __syncthreads();
  float* wz = ws ? ws + (long long)blockIdx.z * outLen : nullptr;
  const int ni = tid % BN, n = n0 + ni, mEnd = min(BM, M - m0);
  if (n < N) {
#pragma unroll 4
    for (int mi = tid / BN; mi < mEnd; mi += NT / BN) {
      float v = Cs[mi * LDC + ni];
      const int oi = (m0 + mi) * N + n;
      if (wz) {
        wz[oi] = v;
      } else {
        if (bias) v += ldAny(bias, bdt, n);
        out[oi] = fromF<T>(v);
      }
    }
  }
}

#define DENSE_ENTRY(name, AK, BKC, PREC)                                                                       \
  extern "C" __global__ void __launch_bounds__(NT)                                                            \
      name(int M, int N, int K, const void* a, const void* b, void* out, float* ws, const void* bias, int bdt, \
           int tilesPerSplit, int outLen) {                                                                   \
    typedef Prec<PREC>::T T;                                                                                  \
    denseGemm<AK, BKC, PREC>(M, N, K, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), \
                             ws, bias, bdt, tilesPerSplit, outLen);                                           \
  }

// FWD: A k-contiguous, B k-contiguous; BWDD: A k, B n; BWDW: A m, B n.
DENSE_ENTRY(dense_fwd_tf32, true, true, PTF32)
DENSE_ENTRY(dense_fwd_f16, true, true, PF16)
DENSE_ENTRY(dense_fwd_bf16, true, true, PBF16)
DENSE_ENTRY(dense_bwdd_tf32, true, false, PTF32)
DENSE_ENTRY(dense_bwdd_f16, true, false, PF16)
DENSE_ENTRY(dense_bwdd_bf16, true, false, PBF16)
DENSE_ENTRY(dense_bwdw_tf32, false, false, PTF32)
DENSE_ENTRY(dense_bwdw_f16, false, false, PF16)
DENSE_ENTRY(dense_bwdw_bf16, false, false, PBF16)

// splitk_reduce sums the split partials in split order and writes the
// output in its dtype; bias (optional) is indexed by (i / bdiv) % bmod.
// Where len is a multiple of 4 a thread sums 4 consecutive elements with
// 16-byte loads (ws is 16-byte aligned), the same sums in the same order.
__device__ __forceinline__ void splitkStore(void* out, int odt, int i, float v, const void* bias, int bdt, int bdiv,
                                            int bmod) {
  if (bias) v += ldAny(bias, bdt, (i / bdiv) % bmod);
  stAny(out, odt, i, v);
}

extern "C" __global__ void splitk_reduce(void* out, int odt, const float* __restrict__ ws, int splits, int len,
                                         const void* bias, int bdt, int bdiv, int bmod) {
  if ((len & 3) == 0) {
    const int len4 = len >> 2;
    const float4* __restrict__ w4 = reinterpret_cast<const float4*>(ws);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < len4; i += gridDim.x * blockDim.x) {
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
      for (int z = 0; z < splits; z++) {
        const float4 p = w4[(long long)z * len4 + i];
        v.x += p.x;
        v.y += p.y;
        v.z += p.z;
        v.w += p.w;
      }
      splitkStore(out, odt, 4 * i, v.x, bias, bdt, bdiv, bmod);
      splitkStore(out, odt, 4 * i + 1, v.y, bias, bdt, bdiv, bmod);
      splitkStore(out, odt, 4 * i + 2, v.z, bias, bdt, bdiv, bmod);
      splitkStore(out, odt, 4 * i + 3, v.w, bias, bdt, bdiv, bmod);
    }
    return;
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x) {
    float v = 0.f;
    for (int z = 0; z < splits; z++) v += ws[(long long)z * len + i];
    splitkStore(out, odt, i, v, bias, bdt, bdiv, bmod);
  }
}
