// SwiGLU, 128-bit loads with a grid-stride loop: a grid sized to fill the GPU (blocks per CU x CUs)
// sweeps the 16-byte chunks, each thread issuing the loads of two chunks before computing either
// (more bytes in flight per thread, fewer blocks to schedule). Same fast-path condition as the 128-bit
// version (cols % 8 == 0, 16-byte aligned pointers); other shapes use the scalar kernel.
#include "swiglu.h"

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

__device__ __forceinline__ uint32_t swiglu2(uint32_t x, uint32_t y) {
    float x0 = bf16_to_float((uint16_t)(x & 0xffffu)), x1 = bf16_to_float((uint16_t)(x >> 16));
    float y0 = bf16_to_float((uint16_t)(y & 0xffffu)), y1 = bf16_to_float((uint16_t)(y >> 16));
    return (uint32_t)float_to_bf16(silu(x0) * y0) | ((uint32_t)float_to_bf16(silu(x1) * y1) << 16);
}

__device__ __forceinline__ uint4 swiglu8(uint4 x, uint4 y) {
    uint4 o;
    o.x = swiglu2(x.x, y.x);
    o.y = swiglu2(x.y, y.y);
    o.z = swiglu2(x.z, y.z);
    o.w = swiglu2(x.w, y.w);
    return o;
}

__global__ void swiglu_scalar(const uint16_t* __restrict__ gate_up, uint16_t* __restrict__ out, int rows,
                              int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * cols;
    if (i >= n) return;
    long long r = i / cols;
    long long c = i - r * cols;
    const uint16_t* row = gate_up + r * 2 * cols;
    out[i] = float_to_bf16(silu(bf16_to_float(row[c])) * bf16_to_float(row[cols + c]));
}

// Chunk i (of n = rows * vcols) lives in row i / vcols; its gate chunk is at i + row * vcols and its up
// chunk vcols further. Index type T is 32-bit when 2 * n fits, else 64-bit.
template <typename T>
__global__ void swiglu_vec8_grid(const uint4* __restrict__ gate_up, uint4* __restrict__ out, T n, T vcols) {
    const T stride = (T)gridDim.x * blockDim.x;
    T i = (T)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n; i += 2 * stride) {
        T j = i + stride;
        T gi = i + (i / vcols) * vcols, gj = j + (j / vcols) * vcols;
        uint4 xi = gate_up[gi], yi = gate_up[gi + vcols];
        uint4 xj = gate_up[gj], yj = gate_up[gj + vcols];
        out[i] = swiglu8(xi, yi);
        out[j] = swiglu8(xj, yj);
    }
    if (i < n) {
        T gi = i + (i / vcols) * vcols;
        out[i] = swiglu8(gate_up[gi], gate_up[gi + vcols]);
    }
}

hipError_t swiglu_launch(const uint16_t* gate_up, uint16_t* out, int rows, int cols, hipStream_t stream) {
    const int threads = 256;
    bool aligned = ((uintptr_t)gate_up % 16 == 0) && ((uintptr_t)out % 16 == 0);
    if (cols % 8 == 0 && aligned) {
        long long n = (long long)rows * (cols / 8);
        if (n == 0) return hipSuccess;
        static int cus = 0;
        if (cus == 0) {
            int dev = 0;
            hipError_t e = hipGetDevice(&dev);
            if (e == hipSuccess) e = hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, dev);
            if (e != hipSuccess) return e;
        }
        long long want = (n + threads - 1) / threads;
        long long blocks = want < 8LL * cus ? want : 8LL * cus;
        const uint4* in = reinterpret_cast<const uint4*>(gate_up);
        uint4* o = reinterpret_cast<uint4*>(out);
        if (2 * n < 0xffffffffLL)
            hipLaunchKernelGGL(swiglu_vec8_grid<unsigned>, dim3((unsigned)blocks), dim3(threads), 0, stream, in, o,
                               (unsigned)n, (unsigned)(cols / 8));
        else
            hipLaunchKernelGGL(swiglu_vec8_grid<long long>, dim3((unsigned)blocks), dim3(threads), 0, stream, in, o,
                               n, (long long)(cols / 8));
    } else {
        long long n = (long long)rows * cols;
        if (n == 0) return hipSuccess;
        hipLaunchKernelGGL(swiglu_scalar, dim3((unsigned)((n + threads - 1) / threads)), dim3(threads), 0, stream,
                           gate_up, out, rows, cols);
    }
    return hipGetLastError();
}
