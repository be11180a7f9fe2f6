// Fused residual add + RMSNorm, naive original: one block of BLOCK threads per row; pass 1 adds, stores
// the new residual and sums its squares; pass 2 reads the residual back and writes the normalized row
// over x. VEC bf16 elements per access when the row allows it.
#include "fused_add_rmsnorm.h"

// synth:knob BLOCK 64 128 256 512 1024
// synth:knob VEC 1 2 4 8
#define BLOCK 64
#define VEC 1

__global__ void __launch_bounds__(BLOCK)
    fused_add_rmsnorm_kernel(uint16_t* __restrict__ x, uint16_t* __restrict__ residual,
                             const uint16_t* __restrict__ w, int hidden, float eps) {
    uint16_t* xr = x + (size_t)blockIdx.x * hidden;
    uint16_t* rr = residual + (size_t)blockIdx.x * hidden;
    const bool vec = hidden % VEC == 0 && aligned_to(xr, 2 * VEC) && aligned_to(rr, 2 * VEC) &&
                     aligned_to(w, 2 * VEC);
    float ss = 0.0f;
    if (vec) {
        for (int i = threadIdx.x * VEC; i < hidden; i += BLOCK * VEC) {
            uint16_t a[VEC], b[VEC];
            load_vec(a, xr + i);
            load_vec(b, rr + i);
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                b[j] = float_to_bf16(bf16_to_float(a[j]) + bf16_to_float(b[j]));
                float f = bf16_to_float(b[j]);
                ss += f * f;
            }
            store_vec(rr + i, b);
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += BLOCK) {
            uint16_t s = float_to_bf16(bf16_to_float(xr[i]) + bf16_to_float(rr[i]));
            rr[i] = s;
            float f = bf16_to_float(s);
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
            uint16_t b[VEC], g[VEC], o[VEC];
            load_vec(b, rr + i);
            load_vec(g, w + i);
#pragma unroll
            for (int j = 0; j < VEC; ++j) o[j] = float_to_bf16(bf16_to_float(b[j]) * inv * bf16_to_float(g[j]));
            store_vec(xr + i, o);
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += BLOCK)
            xr[i] = float_to_bf16(bf16_to_float(rr[i]) * inv * bf16_to_float(w[i]));
    }
}

gpuError_t fused_add_rmsnorm_launch(uint16_t* x, uint16_t* residual, const uint16_t* w, int rows, int hidden,
                                    float eps, gpuStream_t stream) {
    if (rows == 0 || hidden == 0) return gpuSuccess;
    fused_add_rmsnorm_kernel<<<rows, BLOCK, 0, stream>>>(x, residual, w, hidden, eps);
    return GPU(GetLastError)();
}
