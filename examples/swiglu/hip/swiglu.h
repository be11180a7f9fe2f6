// SwiGLU activation, the kernel interface the test harness calls (this file is not rewritten).
//
//   out[r, c] = SiLU(gate_up[r, c]) * gate_up[r, cols + c],   SiLU(x) = x / (1 + exp(-x))
//
// gate_up: [rows, 2*cols] bf16, row-major (the fused gate|up projection output of an LLM MLP: the gate
// half is columns 0..cols-1, the up half columns cols..2*cols-1 of the same row).
// out:     [rows, cols] bf16, row-major.
// bf16 values are passed as their raw 16-bit patterns (uint16_t): the conversions below work with every
// ROCm release, including those without <hip/hip_bf16.h>.
// The launcher returns the launch error (hipSuccess when the kernel was queued on `stream`).
#pragma once
#include <hip/hip_runtime.h>
#include <stdint.h>

// bf16 bits -> float (exact).
__host__ __device__ inline float bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}

// float -> bf16 bits, round to nearest even (NaN stays NaN).
__host__ __device__ inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

hipError_t swiglu_launch(const uint16_t* gate_up, uint16_t* out, int rows, int cols, hipStream_t stream);
