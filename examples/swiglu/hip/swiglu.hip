// SwiGLU, scalar version: one thread per output element, bf16 loads and stores of 2 bytes each.
#include "swiglu.h"

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

__global__ void swiglu_scalar(const uint16_t* __restrict__ gate_up, uint16_t* __restrict__ out, int rows,
                              int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * cols;
    if (i >= n) return;
    long long r = i / cols;
    long long c = i - r * cols;
    const uint16_t* row = gate_up + r * 2 * cols;
    float x = bf16_to_float(row[c]);
    float y = bf16_to_float(row[cols + c]);
    out[i] = float_to_bf16(silu(x) * y);
}

hipError_t swiglu_launch(const uint16_t* gate_up, uint16_t* out, int rows, int cols, hipStream_t stream) {
    long long n = (long long)rows * cols;
    if (n == 0) return hipSuccess;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    hipLaunchKernelGGL(swiglu_scalar, dim3((unsigned)blocks), dim3(threads), 0, stream, gate_up, out, rows, cols);
    return hipGetLastError();
}
