// SwiGLU, 128-bit version: each thread loads 8 bf16 of the gate half and 8 of the up half with one
// 16-byte load each (uint4) and writes 8 outputs with one 16-byte store. Fast path when cols % 8 == 0
// and both pointers are 16-byte aligned (then every row segment is); any other shape or pointer falls
// back to the scalar kernel, so odd widths stay correct.
#include "swiglu.h"

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

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

// vcols = cols / 8: 16-byte chunks per row of the output (and per half row of gate_up).
__global__ void swiglu_vec8(const uint4* __restrict__ gate_up, uint4* __restrict__ out, int rows, int vcols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * vcols;
    if (i >= n) return;
    long long r = i / vcols;
    long long c = i - r * vcols;
    uint4 x = gate_up[r * 2 * vcols + c];
    uint4 y = gate_up[r * 2 * vcols + vcols + c];
    uint4 o;
    o.x = swiglu2(x.x, y.x);
    o.y = swiglu2(x.y, y.y);
    o.z = swiglu2(x.z, y.z);
    o.w = swiglu2(x.w, y.w);
    out[i] = o;
}

hipError_t swiglu_launch(const uint16_t* gate_up, uint16_t* out, int rows, int cols, hipStream_t stream) {
    const int threads = 256;
    bool aligned = ((uintptr_t)gate_up % 16 == 0) && ((uintptr_t)out % 16 == 0);
    if (cols % 8 == 0 && aligned) {
        long long n = (long long)rows * (cols / 8);
        if (n == 0) return hipSuccess;
        hipLaunchKernelGGL(swiglu_vec8, dim3((unsigned)((n + threads - 1) / threads)), dim3(threads), 0, stream,
                           reinterpret_cast<const uint4*>(gate_up), reinterpret_cast<uint4*>(out), rows, cols / 8);
    } else {
        long long n = (long long)rows * cols;
        if (n == 0) return hipSuccess;
        hipLaunchKernelGGL(swiglu_scalar, dim3((unsigned)((n + threads - 1) / threads)), dim3(threads), 0, stream,
                           gate_up, out, rows, cols);
    }
    return hipGetLastError();
}
