// Dynamic voxelization of a point cloud (the interface the harness calls; this file is not rewritten),
// as in MMCV's dynamic_voxelize: for point p with coordinates (x, y, z) = points[p, 0..3),
//   c_x = floor((x - range.x_min) / voxel.x), likewise c_y, c_z, over a grid of
//   round((x_max - x_min) / voxel.x) x ... cells;
//   coors[p] = (c_z, c_y, c_x) when every coordinate lies in its grid, else (-1, -1, -1).
// points: [num_points, num_features] fp32 row-major (num_features >= 3); coors: [num_points, 3] int32.
// Arithmetic in fp32 exactly as written (a subtraction, a division, a floor).
#pragma once
#include "common/gpu.h"

struct VoxelGrid {
    float voxel_x, voxel_y, voxel_z;
    float x_min, y_min, z_min, x_max, y_max, z_max;
};

gpuError_t voxelize_launch(const float* points, int32_t* coors, int num_points, int num_features, VoxelGrid grid,
                           gpuStream_t stream);
