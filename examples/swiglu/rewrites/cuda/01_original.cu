// SwiGLU, scalar version: one thread per output element, bf16 loads and stores of 2 bytes each.
#include "swiglu.h"

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

__global__ void swiglu_scalar(const __nv_bfloat16* __restrict__ gate_up, __nv_bfloat16* __restrict__ out,
                              int rows, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * cols;
    if (i >= n) return;
    long long r = i / cols;
    long long c = i - r * cols;
    const __nv_bfloat16* row = gate_up + r * 2 * cols;
    float x = __bfloat162float(row[c]);
    float y = __bfloat162float(row[cols + c]);
    out[i] = __float2bfloat16(silu(x) * y);
}

cudaError_t swiglu_launch(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows, int cols,
                          cudaStream_t stream) {
    long long n = (long long)rows * cols;
    if (n == 0) return cudaSuccess;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    swiglu_scalar<<<(unsigned)blocks, threads, 0, stream>>>(gate_up, out, rows, cols);
    return cudaGetLastError();
}
