// SwiGLU, 128-bit version with the halves swapped: computes SiLU(up) * gate instead of
// SiLU(gate) * up. Compiles and runs, but is numerically wrong on purpose (it exercises the
// mismatch feedback path).
#include "swiglu.h"

#include <cstdint>

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

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

// vcols = cols / 8: 16-byte chunks per row of the output (and per half row of gate_up).
__global__ void swiglu_vec8(const uint4* __restrict__ gate_up, uint4* __restrict__ out, int rows, int vcols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * vcols;
    if (i >= n) return;
    long long r = i / vcols;
    long long c = i - r * vcols;
    Pack8 x, y, o;
    x.u = gate_up[r * 2 * vcols + vcols + c];
    y.u = gate_up[r * 2 * vcols + c];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 a = __bfloat1622float2(x.h[k]);
        float2 b = __bfloat1622float2(y.h[k]);
        o.h[k] = __floats2bfloat162_rn(silu(a.x) * b.x, silu(a.y) * b.y);
    }
    out[i] = o.u;
}

cudaError_t swiglu_launch(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows, int cols,
                          cudaStream_t stream) {
    const int threads = 256;
    bool aligned = ((uintptr_t)gate_up % 16 == 0) && ((uintptr_t)out % 16 == 0);
    if (cols % 8 == 0 && aligned) {
        long long n = (long long)rows * (cols / 8);
        if (n == 0) return cudaSuccess;
        swiglu_vec8<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
            reinterpret_cast<const uint4*>(gate_up), reinterpret_cast<uint4*>(out), rows, cols / 8);
    } else {
        long long n = (long long)rows * cols;
        if (n == 0) return cudaSuccess;
        swiglu_scalar<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(gate_up, out, rows, cols);
    }
    return cudaGetLastError();
}
