// Rotary embedding, naive original: one block of BLOCK threads per token walks the (head, pair) items of
// its query and key heads; VEC neighbouring pairs per item when head_dim allows it.
#include "rope.h"

// synth:knob BLOCK 32 64 128 256 512
// synth:knob VEC 1 2 4 8
#define BLOCK 32
#define VEC 1

// VEC neighbouring pairs (i .. i+VEC-1 with half+i .. half+i+VEC-1) of one head, in two accesses each.
__device__ __forceinline__ void rotate_vec(uint16_t* head, const float* cs, int half, int i) {
    uint16_t a[VEC], b[VEC];
    load_vec(a, head + i);
    load_vec(b, head + half + i);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
        const float c = cs[i + j], s = cs[half + i + j];
        const float x1 = bf16_to_float(a[j]), x2 = bf16_to_float(b[j]);
        a[j] = float_to_bf16(x1 * c - x2 * s);
        b[j] = float_to_bf16(x2 * c + x1 * s);
    }
    store_vec(head + i, a);
    store_vec(head + half + i, b);
}

__global__ void __launch_bounds__(BLOCK)
    rope_kernel(const int64_t* __restrict__ positions, uint16_t* __restrict__ q, uint16_t* __restrict__ k,
                const float* __restrict__ cos_sin, int q_heads, int kv_heads, int head_dim) {
    const int t = blockIdx.x;
    const int half = head_dim / 2;
    const float* cs = cos_sin + (size_t)positions[t] * head_dim;
    const bool vec = half % VEC == 0 && aligned_to(q, 2 * VEC) && aligned_to(k, 2 * VEC);
    const int per_head = vec ? half / VEC : half;
    const int step = vec ? VEC : 1;
    const int items = (q_heads + kv_heads) * per_head;
    for (int it = threadIdx.x; it < items; it += BLOCK) {
        const int h = it / per_head, i = (it - h * per_head) * step;
        uint16_t* head = h < q_heads ? q + ((size_t)t * q_heads + h) * head_dim
                                     : k + ((size_t)t * kv_heads + (h - q_heads)) * head_dim;
        if (vec) {
            rotate_vec(head, cs, half, i);
        } else {
            // One pair at a time (VEC pairs would run past the half).
            const float c = cs[i], s = cs[half + i];
            const float x1 = bf16_to_float(head[i]), x2 = bf16_to_float(head[half + i]);
            head[i] = float_to_bf16(x1 * c - x2 * s);
            head[half + i] = float_to_bf16(x2 * c + x1 * s);
        }
    }
}

gpuError_t rope_launch(const int64_t* positions, uint16_t* q, uint16_t* k, const float* cos_sin, int tokens,
                       int q_heads, int kv_heads, int head_dim, gpuStream_t stream) {
    if (tokens == 0 || head_dim == 0) return gpuSuccess;
    if (head_dim % 2) return GPU(ErrorInvalidValue);
    rope_kernel<<<tokens, BLOCK, 0, stream>>>(positions, q, k, cos_sin, q_heads, kv_heads, head_dim);
    return GPU(GetLastError)();
}
