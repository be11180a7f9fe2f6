// The CUDA/HIP common subset every kernel of the suite is written in. Kernel sources and harnesses use
// gpuError_t, gpuStream_t, gpuDeviceProp, gpuSuccess and GPU(Name) (cudaName or hipName), so the CUDA and the HIP tree
// hold the same text; bf16 travels as raw uint16_t bits (Debian's ROCm 5.2 has no hip_bf16.h) and fp8
// e4m3 as uint8_t.
#pragma once
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define GPU(name) hip##name
typedef hipDeviceProp_t gpuDeviceProp;
#else
#include <cuda_runtime.h>
#define GPU(name) cuda##name
typedef cudaDeviceProp gpuDeviceProp;
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef GPU(Error_t) gpuError_t;
typedef GPU(Stream_t) gpuStream_t;
#define gpuSuccess GPU(Success)

// bf16 bits <-> float (round to nearest even; NaN stays NaN).
__host__ __device__ __forceinline__ float bf16_to_float(uint16_t b) {
    union {
        uint32_t u;
        float f;
    } x;
    x.u = (uint32_t)b << 16;
    return x.f;
}

__host__ __device__ __forceinline__ uint16_t float_to_bf16(float f) {
    union {
        float f;
        uint32_t u;
    } x;
    x.f = f;
    if ((x.u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    x.u += 0x7fffu + ((x.u >> 16) & 1u);
    return (uint16_t)(x.u >> 16);
}

// An unsigned type of N bytes, for vector loads and stores of N bytes.
template <int N>
struct Bits;
template <>
struct Bits<1> {
    typedef uint8_t T;
};
template <>
struct Bits<2> {
    typedef uint16_t T;
};
template <>
struct Bits<4> {
    typedef uint32_t T;
};
template <>
struct Bits<8> {
    typedef uint2 T;
};
template <>
struct Bits<16> {
    typedef uint4 T;
};

// N elements at src (aligned to their total size) into registers, in one access.
template <typename E, int N>
__device__ __forceinline__ void load_vec(E (&dst)[N], const E* src) {
    typedef typename Bits<sizeof(E) * N>::T V;
    V v = *reinterpret_cast<const V*>(src);
    memcpy(dst, &v, sizeof v);
}

template <typename E, int N>
__device__ __forceinline__ void store_vec(E* dst, const E (&src)[N]) {
    typedef typename Bits<sizeof(E) * N>::T V;
    V v;
    memcpy(&v, src, sizeof v);
    *reinterpret_cast<V*>(dst) = v;
}

__host__ __device__ __forceinline__ bool aligned_to(const void* p, int bytes) {
    return ((uintptr_t)p % (uintptr_t)bytes) == 0;
}
