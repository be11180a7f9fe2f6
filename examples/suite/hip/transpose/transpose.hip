// Transpose, naive original: the matrix in TILE x TILE tiles, one block of TILE x (TILE / ROWS) threads
// per tile, each thread ROWS rows of it. SMEM = 0 copies straight from in to out (reads coalesced,
// writes strided); SMEM = 1 stages the tile in shared memory (PAD = 1 pads its rows against bank
// conflicts) so that writes are coalesced too.
#include "transpose.h"

// synth:knob TILE 8 16 32 64
// synth:knob ROWS 1 2 4 8
// synth:knob SMEM 0 1
// synth:knob PAD 0 1
#define TILE 8
#define ROWS 1
#define SMEM 0
#define PAD 0

static_assert(TILE % ROWS == 0, "a thread takes whole rows of its tile");

__global__ void transpose_kernel(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
#if SMEM
    __shared__ float tile[TILE][TILE + PAD];
    for (int j = threadIdx.y; j < TILE; j += TILE / ROWS) {
        const int r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = in[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < TILE; j += TILE / ROWS) {
        const int c = c0 + j, r = r0 + threadIdx.x;  // out row c, column r
        if (c < cols && r < rows) out[(size_t)c * rows + r] = tile[threadIdx.x][j];
    }
#else
    for (int j = threadIdx.y; j < TILE; j += TILE / ROWS) {
        const int r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
    }
#endif
}

gpuError_t transpose_launch(const float* in, float* out, int rows, int cols, gpuStream_t stream) {
    if (rows == 0 || cols == 0) return gpuSuccess;
    const dim3 block(TILE, TILE / ROWS);
    const dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
    transpose_kernel<<<grid, block, 0, stream>>>(in, out, rows, cols);
    return GPU(GetLastError)();
}
