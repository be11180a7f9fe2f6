// Row softmax, naive original: one block of BLOCK threads per row, three passes (max, sum of
// exponentials, normalize) with shared-memory tree reductions; VEC floats per access when the row allows.
#include "softmax.h"

// synth:knob BLOCK 64 128 256 512 1024
// synth:knob VEC 1 2 4
#define BLOCK 64
#define VEC 1

// Tree reduction over the block (BLOCK is a power of two); every thread gets the result.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            red[threadIdx.x] = MAX ? fmaxf(red[threadIdx.x], red[threadIdx.x + s]) : red[threadIdx.x] + red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(BLOCK) softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    const bool vec = cols % VEC == 0 && aligned_to(xr, 4 * VEC) && aligned_to(yr, 4 * VEC);
    __shared__ float red[BLOCK];
    float m = -INFINITY;
    if (vec) {
        for (int i = threadIdx.x * VEC; i < cols; i += BLOCK * VEC) {
            float v[VEC];
            load_vec(v, xr + i);
#pragma unroll
            for (int j = 0; j < VEC; ++j) m = fmaxf(m, v[j]);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += BLOCK) m = fmaxf(m, xr[i]);
    }
    m = block_reduce<true>(m, red);
    float s = 0.0f;
    if (vec) {
        for (int i = threadIdx.x * VEC; i < cols; i += BLOCK * VEC) {
            float v[VEC];
            load_vec(v, xr + i);
#pragma unroll
            for (int j = 0; j < VEC; ++j) s += expf(v[j] - m);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += BLOCK) s += expf(xr[i] - m);
    }
    const float inv = 1.0f / block_reduce<false>(s, red);
    if (vec) {
        for (int i = threadIdx.x * VEC; i < cols; i += BLOCK * VEC) {
            float v[VEC];
            load_vec(v, xr + i);
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[j] = expf(v[j] - m) * inv;
            store_vec(yr + i, v);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += BLOCK) yr[i] = expf(xr[i] - m) * inv;
    }
}

gpuError_t softmax_launch(const float* x, float* y, int rows, int cols, gpuStream_t stream) {
    if (rows == 0 || cols == 0) return gpuSuccess;
    softmax_kernel<<<rows, BLOCK, 0, stream>>>(x, y, cols);
    return GPU(GetLastError)();
}
