// Top-k, naive original: one block of BLOCK threads per row runs k rounds; round j scans the whole row
// for the largest (value, index) that comes after pick j-1 in the order (value descending, index
// ascending), with a shared-memory argmax reduction. VEC floats per access when the row allows it.
#include "topk.h"

// synth:knob BLOCK 64 128 256 512 1024
// synth:knob VEC 1 2 4
#define BLOCK 64
#define VEC 1

// (v, i) comes before (w, j): larger value first, then smaller index.
__device__ __forceinline__ bool before(float v, int i, float w, int j) { return v > w || (v == w && i < j); }

__global__ void __launch_bounds__(BLOCK) topk_kernel(const float* __restrict__ x, float* __restrict__ vals,
                                                    int32_t* __restrict__ idx, int vocab, int k) {
    const float* xr = x + (size_t)blockIdx.x * vocab;
    const bool vec = vocab % VEC == 0 && aligned_to(xr, 4 * VEC);
    __shared__ float sv[BLOCK];
    __shared__ int si[BLOCK];
    float prev_v = INFINITY;
    int prev_i = -1;
    for (int round = 0; round < k; ++round) {
        float best_v = -INFINITY;
        int best_i = 0x7fffffff;
        if (vec) {
            for (int c = threadIdx.x * VEC; c < vocab; c += BLOCK * VEC) {
                float v[VEC];
                load_vec(v, xr + c);
#pragma unroll
                for (int j = 0; j < VEC; ++j)
                    if (before(prev_v, prev_i, v[j], c + j) && before(v[j], c + j, best_v, best_i)) {
                        best_v = v[j];
                        best_i = c + j;
                    }
            }
        } else {
            for (int c = threadIdx.x; c < vocab; c += BLOCK)
                if (before(prev_v, prev_i, xr[c], c) && before(xr[c], c, best_v, best_i)) {
                    best_v = xr[c];
                    best_i = c;
                }
        }
        sv[threadIdx.x] = best_v;
        si[threadIdx.x] = best_i;
        __syncthreads();
        for (int s = BLOCK / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s && before(sv[threadIdx.x + s], si[threadIdx.x + s], sv[threadIdx.x], si[threadIdx.x])) {
                sv[threadIdx.x] = sv[threadIdx.x + s];
                si[threadIdx.x] = si[threadIdx.x + s];
            }
            __syncthreads();
        }
        prev_v = sv[0];
        prev_i = si[0];
        if (threadIdx.x == 0) {
            vals[(size_t)blockIdx.x * k + round] = prev_v;
            idx[(size_t)blockIdx.x * k + round] = prev_i;
        }
        __syncthreads();
    }
}

gpuError_t topk_launch(const float* x, float* vals, int32_t* idx, int rows, int vocab, int k, gpuStream_t stream) {
    if (rows == 0) return gpuSuccess;
    if (k < 1 || k > vocab) return GPU(ErrorInvalidValue);
    topk_kernel<<<rows, BLOCK, 0, stream>>>(x, vals, idx, vocab, k);
    return GPU(GetLastError)();
}
