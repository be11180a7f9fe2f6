// RMSNorm, naive original: one block of BLOCK threads per row, two passes over the row (sum of squares,
// then scale), a shared-memory tree reduction, VEC bf16 elements per access when the row allows it.
#include "rmsnorm.h"

// synth:knob BLOCK 64 128 256 512 1024
// synth:knob VEC 1 2 4 8
#define BLOCK 64
#define VEC 1

__global__ void __launch_bounds__(BLOCK)
    rmsnorm_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, uint16_t* __restrict__ out,
                   int hidden, float eps) {
    const uint16_t* xr = x + (size_t)blockIdx.x * hidden;
    uint16_t* outr = out + (size_t)blockIdx.x * hidden;
    const bool vec = hidden % VEC == 0 && aligned_to(xr, 2 * VEC) && aligned_to(w, 2 * VEC) &&
                     aligned_to(outr, 2 * VEC);
    float ss = 0.0f;
    if (vec) {
        for (int i = threadIdx.x * VEC; i < hidden; i += BLOCK * VEC) {
            uint16_t h[VEC];
            load_vec(h, xr + i);
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                float f = bf16_to_float(h[j]);
                ss += f * f;
            }
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += BLOCK) {
            float f = bf16_to_float(xr[i]);
            ss += f * f;
        }
    }
    __shared__ float red[BLOCK];
    red[threadIdx.x] = ss;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = rsqrtf(red[0] / (float)hidden + eps);
    if (vec) {
        for (int i = threadIdx.x * VEC; i < hidden; i += BLOCK * VEC) {
            uint16_t h[VEC], g[VEC], o[VEC];
            load_vec(h, xr + i);
            load_vec(g, w + i);
#pragma unroll
            for (int j = 0; j < VEC; ++j) o[j] = float_to_bf16(bf16_to_float(h[j]) * inv * bf16_to_float(g[j]));
            store_vec(outr + i, o);
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += BLOCK)
            outr[i] = float_to_bf16(bf16_to_float(xr[i]) * inv * bf16_to_float(w[i]));
    }
}

gpuError_t rmsnorm_launch(const uint16_t* x, const uint16_t* w, uint16_t* out, int rows, int hidden, float eps,
                          gpuStream_t stream) {
    if (rows == 0 || hidden == 0) return gpuSuccess;
    rmsnorm_kernel<<<rows, BLOCK, 0, stream>>>(x, w, out, hidden, eps);
    return GPU(GetLastError)();
}
