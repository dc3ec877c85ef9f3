// RMSNorm forward and backward in CUDA C++, for the cuda-naive and cuda-persistent plug-ins.
//
//   y  = x · rstd · γ,            rstd = rsqrt(mean(x²) + eps)             (forward, one block per row)
//   dx = rstd · (γ·dy − x · rstd² · mean(γ·dy·x))                          (both backwards)
//   dγ = Σ_rows dy · x · rstd                                              (the two differ only here)
//
// Naive chain (three kernels, five passes over M×N): one block per row writes dx and its row of dγ
// contributions (an M×N tensor in x's dtype); a column sum reduces that to 64 fp32 partial rows; a second
// sums those into dγ.
// Persistent: G = SMs × blocks per SM (the occupancy API) blocks; block b walks rows b, b+G, …, copies
// row t+1 into the second shared-memory stage with cp.async (`__pipeline_memcpy_async`) while it computes
// row t, keeps its dγ partial in registers and writes one fp32 row at the end; a small column sum finishes.
//
// Elements travel as 16-byte vectors (8 bf16/fp16); arithmetic is fp32; reductions go warp (shuffles) then
// block (one float per warp in shared memory), always in the same order: the results are deterministic.
// Every thread owns the same vectors of every row (v = threadIdx.x + k·blockDim.x, k < VPT), so in the
// persistent kernel each thread reads from shared memory only what its own cp.async wrote there.
//
// No header is needed (NVRTC or nvcc, any CUDA 12/13 toolkit): halves are converted with PTX `cvt`, and
// unless RMS_USE_CUDA_PIPELINE is defined (with the toolkit's include directory), the three cp.async
// primitives of cuda_pipeline.h are spelled here in PTX, under the same names.

typedef unsigned short u16;
typedef unsigned int u32;

#ifdef RMS_USE_CUDA_PIPELINE
#include <cuda_pipeline.h>
#else
__device__ __forceinline__ void __pipeline_memcpy_async(void* dst_shared, const void* src_global, unsigned long size) {
  // size is always 16 here (cp.async.cg copies 16 bytes, bypassing L1)
  unsigned s;
  asm volatile("{ .reg .u64 p; cvta.to.shared.u64 p, %1; cvt.u32.u64 %0, p; }" : "=r"(s) : "l"(dst_shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src_global) : "memory");
}
__device__ __forceinline__ void __pipeline_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void __pipeline_wait_prior(unsigned long prior) {
  // only 0 and 1 are used: the pipeline has two stages
  if (prior == 0) asm volatile("cp.async.wait_group 0;" ::: "memory");
  else asm volatile("cp.async.wait_group 1;" ::: "memory");
}
#endif

// ---- halves <-> fp32 ---------------------------------------------------------------------------------
template <bool BF16>
__device__ __forceinline__ float to_float(u16 h) {
  if (BF16) return __uint_as_float(((u32)h) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

template <bool BF16>
__device__ __forceinline__ u16 to_half(float f) {
  u16 h;
  if (BF16) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  else asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// 16 bytes = 8 elements; element 0 is the low half of .x (little-endian)
template <bool BF16>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = to_float<BF16>((u16)(w[i] & 0xffffu));
    f[2 * i + 1] = to_float<BF16>((u16)(w[i] >> 16));
  }
}

template <bool BF16>
__device__ __forceinline__ uint4 pack8(const float* f) {
  u32 w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = (u32)to_half<BF16>(f[2 * i]) | ((u32)to_half<BF16>(f[2 * i + 1]) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// ---- reductions: warp (butterfly shuffles), then block -------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Every thread gets the block's total. blockDim.x is a multiple of 32 (the host makes it so). The first
// barrier lets a previous call's readers finish before `red` is written again.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? red[lane] : 0.f);
}

// ---- forward: one block per row -------------------------------------------------------------------------
template <bool BF16, int VPT>
__device__ __forceinline__ void forward_row(const u16* __restrict__ x, const u16* __restrict__ w, u16* __restrict__ y,
                                            float* __restrict__ rstd, int N, float eps) {
  __shared__ float red[32];
  const long long row = blockIdx.x;
  const int nvec = N >> 3;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * N);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  uint4* yr = reinterpret_cast<uint4*>(y + row * N);
  uint4 xv[VPT];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    xv[k] = make_uint4(0u, 0u, 0u, 0u);
    if (v < nvec) {
      xv[k] = xr[v];
      float f[8];
      unpack8<BF16>(xv[k], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss += f[i] * f[i];
    }
  }
  const float r = rsqrtf(block_sum(ss, red) / (float)N + eps);
  if (threadIdx.x == 0) rstd[row] = r;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    if (v < nvec) {
      float f[8], g[8];
      unpack8<BF16>(xv[k], f);
      unpack8<BF16>(wv[v], g);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = f[i] * r * g[i];
      yr[v] = pack8<BF16>(f);
    }
  }
}

// The x and dy vectors of one row this thread owns (from global memory, or from a shared-memory stage); zeros past
// the row's end.
template <int VPT>
__device__ __forceinline__ void own_vectors(const uint4* xs, const uint4* dys, int nvec, uint4* xv, uint4* dyv) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    xv[k] = dyv[k] = make_uint4(0u, 0u, 0u, 0u);
    if (v < nvec) {
      xv[k] = xs[v];
      dyv[k] = dys[v];
    }
  }
}

// ---- the dx of one row, shared by both backwards ---------------------------------------------------------
// From the row's x and dy vectors (in registers) and γ: writes dx, and hands each element's dγ term
// dy·x·rstd to `take(k, i, term)`.
template <bool BF16, int VPT, typename Take>
__device__ __forceinline__ void dx_row(const uint4* xv, const uint4* dyv, const uint4* __restrict__ wv, float r, int N,
                                       uint4* __restrict__ dxr, float* red, Take take) {
  const int nvec = N >> 3;
  float dot = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    if (v < nvec) {
      float a[8], d[8], g[8];
      unpack8<BF16>(xv[k], a);
      unpack8<BF16>(dyv[k], d);
      unpack8<BF16>(wv[v], g);
#pragma unroll
      for (int i = 0; i < 8; ++i) dot += g[i] * d[i] * a[i];
    }
  }
  const float c = block_sum(dot, red) / (float)N * r * r;  // rstd² · mean(γ·dy·x)
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    if (v < nvec) {
      float a[8], d[8], g[8], o[8];
      unpack8<BF16>(xv[k], a);
      unpack8<BF16>(dyv[k], d);
      unpack8<BF16>(wv[v], g);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        o[i] = r * (g[i] * d[i] - a[i] * c);
        take(k, i, d[i] * a[i] * r);
      }
      dxr[v] = pack8<BF16>(o);
    }
  }
}

// ---- naive chain, kernel 1: one block per row, dx and the row's dγ contributions (x's dtype) -------------
template <bool BF16, int VPT>
__device__ __forceinline__ void naive_row(const u16* __restrict__ x, const u16* __restrict__ w,
                                          const u16* __restrict__ dy, const float* __restrict__ rstd,
                                          u16* __restrict__ dx, u16* __restrict__ contrib, int N) {
  __shared__ float red[32];
  const long long row = blockIdx.x;
  const int nvec = N >> 3;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * N);
  const uint4* dyr = reinterpret_cast<const uint4*>(dy + row * N);
  uint4* cr = reinterpret_cast<uint4*>(contrib + row * N);
  uint4 xv[VPT], dyv[VPT];
  own_vectors<VPT>(xr, dyr, nvec, xv, dyv);
  float terms[VPT][8];
  dx_row<BF16, VPT>(xv, dyv, reinterpret_cast<const uint4*>(w), rstd[row], N,
                    reinterpret_cast<uint4*>(dx + row * N), red,
                    [&](int k, int i, float t) { terms[k][i] = t; });
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    if (v < nvec) cr[v] = pack8<BF16>(terms[k]);
  }
}

// ---- naive chain, kernel 2: column sum of the M×N contributions into P fp32 partial rows ----------------
// Block (x, p) sums rows [p·ceil(M/P), (p+1)·ceil(M/P)) of its columns; one 16-byte vector per thread.
template <bool BF16>
__device__ __forceinline__ void contrib_column_sum(const u16* __restrict__ contrib, float* __restrict__ partial,
                                                   int M, int N) {
  const int nvec = N >> 3;
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  const int p = blockIdx.y, P = gridDim.y;
  if (v >= nvec) return;
  const int per = (M + P - 1) / P;
  const int r0 = p * per;
  const int r1 = min(M, r0 + per);
  float acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.f;
#pragma unroll 8
  for (int r = r0; r < r1; ++r) {  // 8 independent 16-byte loads in flight per thread
    float f[8];
    unpack8<BF16>(reinterpret_cast<const uint4*>(contrib + (long long)r * N)[v], f);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] += f[i];
  }
  float4* out = reinterpret_cast<float4*>(partial + (long long)p * N + 8 * v);
  out[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  out[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
}

// ---- the last pass of both: dγ[n] = Σ_p partial[p, n], in order, one thread per column --------------------
template <bool BF16>
__device__ __forceinline__ void partial_rows_sum(const float* __restrict__ partial, u16* __restrict__ dw, int P, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float acc = 0.f;
  for (int p = 0; p < P; ++p) acc += partial[(long long)p * N + n];
  dw[n] = to_half<BF16>(acc);
}

// ---- persistent backward ---------------------------------------------------------------------------------
// Dynamic shared memory: two stages, each the x row then the dy row (4·N elements in all).
template <bool BF16>
__device__ __forceinline__ void copy_row_async(uint4* sx, uint4* sdy, const u16* __restrict__ x,
                                               const u16* __restrict__ dy, long long row, int N) {
  const int nvec = N >> 3;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * N);
  const uint4* dyr = reinterpret_cast<const uint4*>(dy + row * N);
  for (int v = threadIdx.x; v < nvec; v += blockDim.x) {  // the same vectors this thread computes on
    __pipeline_memcpy_async(sx + v, xr + v, 16);
    __pipeline_memcpy_async(sdy + v, dyr + v, 16);
  }
}

template <bool BF16, int VPT>
__device__ __forceinline__ void persistent_rows(const u16* __restrict__ x, const u16* __restrict__ w,
                                                const u16* __restrict__ dy, const float* __restrict__ rstd,
                                                u16* __restrict__ dx, float* __restrict__ partial, int M, int N) {
  extern __shared__ uint4 stage_mem[];
  __shared__ float red[32];
  const int nvec = N >> 3;
  const int G = gridDim.x;
  // stage s: x row at stage_mem + 2·s·nvec, dy row right after it (arithmetic, not an array: no local memory)
  const uint4* wv = reinterpret_cast<const uint4*>(w);

  float acc[VPT][8];
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[k][i] = 0.f;

  long long row = blockIdx.x;
  int s = 0;
  float r = 0.f;
  if (row < M) {
    copy_row_async<BF16>(stage_mem, stage_mem + nvec, x, dy, row, N);
    r = rstd[row];
  }
  __pipeline_commit();
  for (; row < M; row += G) {
    const long long next = row + G;
    float r_next = 0.f;
    if (next < M) {  // row t+1 into the other stage while row t is computed
      uint4* other = stage_mem + 2 * (s ^ 1) * nvec;
      copy_row_async<BF16>(other, other + nvec, x, dy, next, N);
      r_next = rstd[next];
    }
    __pipeline_commit();      // (an empty group on the last row keeps the count uniform)
    __pipeline_wait_prior(1); // this thread's copies of row t have landed
    const uint4* sx = stage_mem + 2 * s * nvec;
    uint4 xv[VPT], dyv[VPT];
    own_vectors<VPT>(sx, sx + nvec, nvec, xv, dyv);
    dx_row<BF16, VPT>(xv, dyv, wv, r, N, reinterpret_cast<uint4*>(dx + row * N), red,
                      [&](int k, int i, float t) { acc[k][i] += t; });
    r = r_next;
    s ^= 1;
  }
  __pipeline_wait_prior(0);
  float* out = partial + (long long)blockIdx.x * N;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    if (v < nvec) {
      float4* o = reinterpret_cast<float4*>(out + 8 * v);
      o[0] = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
      o[1] = make_float4(acc[k][4], acc[k][5], acc[k][6], acc[k][7]);
    }
  }
}

// ---- entry points: plain C names, one per dtype and vectors per thread ------------------------------------
// Launch bounds: the host never launches more than 512 threads a block (MAX_BLOCK in kernels.py).
#define RMS_ROW_KERNELS(T, BF, VPT)                                                                              \
  extern "C" __global__ void __launch_bounds__(512) rms_fwd_##T##_v##VPT(                                      \
      const u16* __restrict__ x, const u16* __restrict__ w, u16* __restrict__ y, float* __restrict__ rstd, int N, \
      float eps) {                                                                                             \
    forward_row<BF, VPT>(x, w, y, rstd, N, eps);                                                               \
  }                                                                                                            \
  extern "C" __global__ void __launch_bounds__(512) rms_naive_rows_##T##_v##VPT(                               \
      const u16* __restrict__ x, const u16* __restrict__ w, const u16* __restrict__ dy,                        \
      const float* __restrict__ rstd, u16* __restrict__ dx, u16* __restrict__ contrib, int N) {                \
    naive_row<BF, VPT>(x, w, dy, rstd, dx, contrib, N);                                                        \
  }

#define RMS_PERSISTENT_KERNEL(T, BF, VPT)                                                                        \
  extern "C" __global__ void __launch_bounds__(512) rms_persistent_##T##_v##VPT(                               \
      const u16* __restrict__ x, const u16* __restrict__ w, const u16* __restrict__ dy,                        \
      const float* __restrict__ rstd, u16* __restrict__ dx, float* __restrict__ partial, int M, int N) {       \
    persistent_rows<BF, VPT>(x, w, dy, rstd, dx, partial, M, N);                                               \
  }

#define RMS_DTYPE_KERNELS(T, BF)                                                                                 \
  RMS_ROW_KERNELS(T, BF, 1)                                                                                    \
  RMS_ROW_KERNELS(T, BF, 2)                                                                                    \
  RMS_ROW_KERNELS(T, BF, 4)                                                                                    \
  RMS_ROW_KERNELS(T, BF, 8)                                                                                    \
  RMS_PERSISTENT_KERNEL(T, BF, 1)                                                                              \
  RMS_PERSISTENT_KERNEL(T, BF, 2)                                                                              \
  RMS_PERSISTENT_KERNEL(T, BF, 4)                                                                              \
  extern "C" __global__ void __launch_bounds__(256) rms_contrib_colsum_##T(const u16* __restrict__ contrib,    \
                                                                          float* __restrict__ partial, int M, int N) { \
    contrib_column_sum<BF>(contrib, partial, M, N);                                                            \
  }                                                                                                            \
  extern "C" __global__ void __launch_bounds__(256) rms_rows_sum_##T(const float* __restrict__ partial,        \
                                                                    u16* __restrict__ dw, int P, int N) {      \
    partial_rows_sum<BF>(partial, dw, P, N);                                                                   \
  }

RMS_DTYPE_KERNELS(bf16, true)
RMS_DTYPE_KERNELS(f16, false)
