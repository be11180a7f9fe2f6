// FP8 per-token-group quantization, naive original: TPG threads per group of 128 (1: one thread walks
// the group twice, for its maximum and then for the codes), BLOCK threads per block, the group's
// maximum combined through shared memory; VEC bf16 elements per access and per byte store.
#include "fp8_group_quant.h"

// synth:knob BLOCK 32 64 128 256 512
// synth:knob TPG 1 2 4 8 16 32
// synth:knob VEC 1 2 4 8
#define BLOCK 64
#define TPG 1
#define VEC 1

static_assert(BLOCK % TPG == 0, "a block holds whole groups");
static_assert(FP8_GROUP % (TPG * VEC) == 0, "each thread of a group takes whole VEC-wide chunks");

// fp32 -> e4m3fn code, round to nearest even, saturated to 448 (|f| <= 448 here, no NaN).
__device__ __forceinline__ uint8_t to_e4m3(float f) {
    const uint32_t u = __float_as_uint(f);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    const float a = fabsf(f);
    if (a >= 448.0f) return sign | 0x7e;
    if (a < 0.015625f) return sign | (uint8_t)rintf(a * 512.0f);  // subnormals: multiples of 2^-9
    const int e = (int)((u >> 23) & 0xffu) - 127;
    uint32_t m = (u & 0x7fffffu) >> 20;
    const uint32_t rest = u & 0xfffffu;
    if (rest > 0x80000u || (rest == 0x80000u && (m & 1u))) ++m;
    const uint32_t code = ((uint32_t)(e + 7) << 3) + m;  // a carry out of m bumps the exponent
    return sign | (uint8_t)(code > 0x7eu ? 0x7eu : code);
}

__global__ void __launch_bounds__(BLOCK)
    fp8_group_quant_kernel(const uint16_t* __restrict__ x, uint8_t* __restrict__ q, float* __restrict__ scale,
                           long long groups) {
    const long long g = (long long)blockIdx.x * (BLOCK / TPG) + threadIdx.x / TPG;
    const int lane = threadIdx.x % TPG;
    const bool active = g < groups;
    const uint16_t* xg = x + g * FP8_GROUP;
    float amax = 0.0f;
    if (active)
        for (int c = lane * VEC; c < FP8_GROUP; c += TPG * VEC) {
            uint16_t h[VEC];
            load_vec(h, xg + c);
#pragma unroll
            for (int j = 0; j < VEC; ++j) amax = fmaxf(amax, fabsf(bf16_to_float(h[j])));
        }
    __shared__ float red[BLOCK];
    red[threadIdx.x] = amax;
    __syncthreads();
    for (int s = TPG / 2; s > 0; s >>= 1) {
        if (lane < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    if (!active) return;
    const float sc = fmaxf(red[threadIdx.x - lane], 1e-10f) / 448.0f;
    if (lane == 0) scale[g] = sc;
    for (int c = lane * VEC; c < FP8_GROUP; c += TPG * VEC) {
        uint16_t h[VEC];
        uint8_t o[VEC];
        load_vec(h, xg + c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) o[j] = to_e4m3(fminf(fmaxf(bf16_to_float(h[j]) / sc, -448.0f), 448.0f));
        store_vec(q + g * FP8_GROUP + c, o);
    }
}

gpuError_t fp8_group_quant_launch(const uint16_t* x, uint8_t* q, float* scale, int tokens, int hidden,
                                  gpuStream_t stream) {
    if (hidden % FP8_GROUP) return GPU(ErrorInvalidValue);
    const long long groups = (long long)tokens * (hidden / FP8_GROUP);
    if (groups == 0) return gpuSuccess;
    const long long per_block = BLOCK / TPG;
    fp8_group_quant_kernel<<<(unsigned)((groups + per_block - 1) / per_block), BLOCK, 0, stream>>>(x, q, scale, groups);
    return GPU(GetLastError)();
}
