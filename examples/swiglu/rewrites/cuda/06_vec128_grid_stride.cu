// SwiGLU, 128-bit loads with a grid-stride loop: a grid sized to fill the GPU (blocks per SM x SMs)
// sweeps the 16-byte chunks, each thread issuing the loads of two chunks before computing either
// (more bytes in flight per thread, fewer blocks to schedule). Same fast-path condition as the 128-bit
// version (cols % 8 == 0, 16-byte aligned pointers); other shapes use the scalar kernel.
#include "swiglu.h"

#include <cstdint>

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

__device__ __forceinline__ uint4 swiglu8(uint4 xu, uint4 yu) {
    Pack8 x, y, o;
    x.u = xu;
    y.u = yu;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 a = __bfloat1622float2(x.h[k]);
        float2 b = __bfloat1622float2(y.h[k]);
        o.h[k] = __floats2bfloat162_rn(silu(a.x) * b.x, silu(a.y) * b.y);
    }
    return o.u;
}

__global__ void swiglu_scalar(const __nv_bfloat16* __restrict__ gate_up, __nv_bfloat16* __restrict__ out,
                              int rows, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * cols;
    if (i >= n) return;
    long long r = i / cols;
    long long c = i - r * cols;
    const __nv_bfloat16* row = gate_up + r * 2 * cols;
    out[i] = __float2bfloat16(silu(__bfloat162float(row[c])) * __bfloat162float(row[cols + c]));
}

// Chunk i (of n = rows * vcols) lives in row i / vcols; its gate chunk is at i + row * vcols and its up
// chunk vcols further. Index type T is 32-bit when 2 * n fits, else 64-bit.
template <typename T>
__global__ void swiglu_vec8_grid(const uint4* __restrict__ gate_up, uint4* __restrict__ out, T n, T vcols) {
    const T stride = (T)gridDim.x * blockDim.x;
    T i = (T)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n; i += 2 * stride) {
        T j = i + stride;
        T gi = i + (i / vcols) * vcols, gj = j + (j / vcols) * vcols;
        uint4 xi = gate_up[gi], yi = gate_up[gi + vcols];
        uint4 xj = gate_up[gj], yj = gate_up[gj + vcols];
        out[i] = swiglu8(xi, yi);
        out[j] = swiglu8(xj, yj);
    }
    if (i < n) {
        T gi = i + (i / vcols) * vcols;
        out[i] = swiglu8(gate_up[gi], gate_up[gi + vcols]);
    }
}

cudaError_t swiglu_launch(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows, int cols,
                          cudaStream_t stream) {
    const int threads = 256;
    bool aligned = ((uintptr_t)gate_up % 16 == 0) && ((uintptr_t)out % 16 == 0);
    if (cols % 8 == 0 && aligned) {
        long long n = (long long)rows * (cols / 8);
        if (n == 0) return cudaSuccess;
        static int sms = 0;
        if (sms == 0) {
            int dev = 0;
            cudaError_t e = cudaGetDevice(&dev);
            if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
            if (e != cudaSuccess) return e;
        }
        long long want = (n + threads - 1) / threads;
        long long blocks = want < 8LL * sms ? want : 8LL * sms;
        const uint4* in = reinterpret_cast<const uint4*>(gate_up);
        uint4* o = reinterpret_cast<uint4*>(out);
        if (2 * n < 0xffffffffLL)
            swiglu_vec8_grid<unsigned><<<(unsigned)blocks, threads, 0, stream>>>(in, o, (unsigned)n, (unsigned)(cols / 8));
        else
            swiglu_vec8_grid<long long><<<(unsigned)blocks, threads, 0, stream>>>(in, o, n, (long long)(cols / 8));
    } else {
        long long n = (long long)rows * cols;
        if (n == 0) return cudaSuccess;
        swiglu_scalar<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(gate_up, out, rows, cols);
    }
    return cudaGetLastError();
}
