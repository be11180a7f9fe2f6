// SwiGLU, naive original (examples/swiglu's scalar kernel with its knobs exposed): one thread per VEC
// outputs of a row, BLOCK threads per block; VEC-wide accesses when the rows allow it.
#include "swiglu.h"

// synth:knob BLOCK 64 128 256 512 1024
// synth:knob VEC 1 2 4 8
#define BLOCK 256
#define VEC 1

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

__global__ void __launch_bounds__(BLOCK)
    swiglu_kernel(const uint16_t* __restrict__ gate_up, uint16_t* __restrict__ out, int rows, int cols, bool vec) {
    const int step = vec ? VEC : 1;
    const long long per_row = cols / step;
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= (long long)rows * per_row) return;
    const long long r = i / per_row;
    const int c = (int)(i - r * per_row) * step;
    const uint16_t* row = gate_up + r * 2 * cols;
    uint16_t* o = out + r * cols;
    if (vec) {
        uint16_t g[VEC], u[VEC], y[VEC];
        load_vec(g, row + c);
        load_vec(u, row + cols + c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) y[j] = float_to_bf16(silu(bf16_to_float(g[j])) * bf16_to_float(u[j]));
        store_vec(o + c, y);
    } else {
        o[c] = float_to_bf16(silu(bf16_to_float(row[c])) * bf16_to_float(row[cols + c]));
    }
}

gpuError_t swiglu_launch(const uint16_t* gate_up, uint16_t* out, int rows, int cols, gpuStream_t stream) {
    if (rows == 0 || cols == 0) return gpuSuccess;
    const bool vec = cols % VEC == 0 && aligned_to(gate_up, 2 * VEC) && aligned_to(out, 2 * VEC);
    const long long threads = (long long)rows * (vec ? cols / VEC : cols);
    swiglu_kernel<<<(unsigned)((threads + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(gate_up, out, rows, cols, vec);
    return GPU(GetLastError)();
}
