// SwiGLU, bf16x2 version: each thread loads two adjacent bf16 of the gate and of the up half as one
// 32-bit __nv_bfloat162, and stores two outputs at once. Needs an even `cols` (every row then starts
// 4-byte aligned); other shapes use the scalar kernel.
#include "swiglu.h"

#include <cstdint>

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

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

__global__ void swiglu_bf16x2(const __nv_bfloat162* __restrict__ gate_up, __nv_bfloat162* __restrict__ out,
                              int rows, int half_cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * half_cols;
    if (i >= n) return;
    long long r = i / half_cols;
    long long c = i - r * half_cols;
    const __nv_bfloat162* row = gate_up + r * 2 * half_cols;
    float2 x = __bfloat1622float2(row[c]);
    float2 y = __bfloat1622float2(row[half_cols + c]);
    out[i] = __floats2bfloat162_rn(silu(x.x) * y.x, silu(x.y) * y.y);
}

cudaError_t swiglu_launch(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows, int cols,
                          cudaStream_t stream) {
    const int threads = 256;
    bool aligned = ((uintptr_t)gate_up % 4 == 0) && ((uintptr_t)out % 4 == 0);
    if (cols % 2 == 0 && aligned) {
        long long n = (long long)rows * (cols / 2);
        if (n == 0) return cudaSuccess;
        swiglu_bf16x2<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
            reinterpret_cast<const __nv_bfloat162*>(gate_up), reinterpret_cast<__nv_bfloat162*>(out), rows,
            cols / 2);
    } else {
        long long n = (long long)rows * cols;
        if (n == 0) return cudaSuccess;
        swiglu_scalar<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(gate_up, out, rows, cols);
    }
    return cudaGetLastError();
}
