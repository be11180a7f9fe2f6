// SwiGLU, bf16x2 version: each thread loads two adjacent bf16 of the gate and of the up half as one
// 32-bit word, and stores two outputs at once. Needs an even `cols` (every row then starts 4-byte
// aligned); other shapes use the scalar kernel.
#include "swiglu.h"

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

// Two bf16 packed in a 32-bit word (low half = lower address).
__device__ __forceinline__ uint32_t swiglu2(uint32_t x, uint32_t y) {
    float x0 = bf16_to_float((uint16_t)(x & 0xffffu)), x1 = bf16_to_float((uint16_t)(x >> 16));
    float y0 = bf16_to_float((uint16_t)(y & 0xffffu)), y1 = bf16_to_float((uint16_t)(y >> 16));
    return (uint32_t)float_to_bf16(silu(x0) * y0) | ((uint32_t)float_to_bf16(silu(x1) * y1) << 16);
}

__global__ void swiglu_scalar(const uint16_t* __restrict__ gate_up, uint16_t* __restrict__ out, int rows,
                              int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * cols;
    if (i >= n) return;
    long long r = i / cols;
    long long c = i - r * cols;
    const uint16_t* row = gate_up + r * 2 * cols;
    out[i] = float_to_bf16(silu(bf16_to_float(row[c])) * bf16_to_float(row[cols + c]));
}

__global__ void swiglu_bf16x2(const uint32_t* __restrict__ gate_up, uint32_t* __restrict__ out, int rows,
                              int half_cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * half_cols;
    if (i >= n) return;
    long long r = i / half_cols;
    long long c = i - r * half_cols;
    const uint32_t* row = gate_up + r * 2 * half_cols;
    out[i] = swiglu2(row[c], row[half_cols + c]);
}

hipError_t swiglu_launch(const uint16_t* gate_up, uint16_t* out, int rows, int cols, hipStream_t stream) {
    const int threads = 256;
    bool aligned = ((uintptr_t)gate_up % 4 == 0) && ((uintptr_t)out % 4 == 0);
    if (cols % 2 == 0 && aligned) {
        long long n = (long long)rows * (cols / 2);
        if (n == 0) return hipSuccess;
        hipLaunchKernelGGL(swiglu_bf16x2, dim3((unsigned)((n + threads - 1) / threads)), dim3(threads), 0, stream,
                           reinterpret_cast<const uint32_t*>(gate_up), reinterpret_cast<uint32_t*>(out), rows,
                           cols / 2);
    } else {
        long long n = (long long)rows * cols;
        if (n == 0) return hipSuccess;
        hipLaunchKernelGGL(swiglu_scalar, dim3((unsigned)((n + threads - 1) / threads)), dim3(threads), 0, stream,
                           gate_up, out, rows, cols);
    }
    return hipGetLastError();
}
