// Dynamic voxelization, naive original: BLOCK threads per block, PPT points per thread (consecutive
// points of a block-wide stride), coordinates read with scalar loads or, with VEC4 = 1 and 4 features
// per point, one 16-byte load.
#include "voxelize.h"

#include <math.h>

// synth:knob BLOCK 32 64 128 256 512 1024
// synth:knob PPT 1 2 4 8
// synth:knob VEC4 0 1
#define BLOCK 64
#define PPT 1
#define VEC4 0

__global__ void __launch_bounds__(BLOCK)
    voxelize_kernel(const float* __restrict__ points, int32_t* __restrict__ coors, int num_points, int num_features,
                    VoxelGrid g, int gx, int gy, int gz, bool vec4) {
    const long long first = (long long)blockIdx.x * BLOCK * PPT + threadIdx.x;
#pragma unroll
    for (int j = 0; j < PPT; ++j) {
        const long long p = first + (long long)j * BLOCK;
        if (p >= num_points) return;
        const float* pt = points + p * num_features;
        float x, y, z;
        if (VEC4 && vec4) {
            float v[4];
            load_vec(v, pt);
            x = v[0];
            y = v[1];
            z = v[2];
        } else {
            x = pt[0];
            y = pt[1];
            z = pt[2];
        }
        const int cx = (int)floorf((x - g.x_min) / g.voxel_x);
        const int cy = (int)floorf((y - g.y_min) / g.voxel_y);
        const int cz = (int)floorf((z - g.z_min) / g.voxel_z);
        int32_t* o = coors + p * 3;
        if (cx < 0 || cx >= gx || cy < 0 || cy >= gy || cz < 0 || cz >= gz) {
            o[0] = o[1] = o[2] = -1;
        } else {
            o[0] = cz;
            o[1] = cy;
            o[2] = cx;
        }
    }
}

gpuError_t voxelize_launch(const float* points, int32_t* coors, int num_points, int num_features, VoxelGrid g,
                           gpuStream_t stream) {
    if (num_points == 0) return gpuSuccess;
    if (num_features < 3) return GPU(ErrorInvalidValue);
    const int gx = (int)roundf((g.x_max - g.x_min) / g.voxel_x);
    const int gy = (int)roundf((g.y_max - g.y_min) / g.voxel_y);
    const int gz = (int)roundf((g.z_max - g.z_min) / g.voxel_z);
    const bool vec4 = num_features == 4 && aligned_to(points, 16);
    const long long per_block = (long long)BLOCK * PPT;
    voxelize_kernel<<<(unsigned)((num_points + per_block - 1) / per_block), BLOCK, 0, stream>>>(
        points, coors, num_points, num_features, g, gx, gy, gz, vec4);
    return GPU(GetLastError)();
}
