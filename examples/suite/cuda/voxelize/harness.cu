// Harness of the dynamic voxelization task: every coordinate at an odd shape (1001 points of 5 features)
// and at the serving shape (default 4,194,304 points of 4 features, a few LiDAR sweeps) against a CPU
// reference, then the serving shape timed. The grid is KITTI-like (x, y in [-51.2, 51.2), z in [-5, 3),
// 0.2 m voxels) and points spread past it on every side, so both branches are taken.
// Usage: ./voxelize/bench [points=4194304] [features=4] [reps=100]
// Coordinates must be equal exactly.
#include "common/bench.h"
#include "voxelize.h"

static const VoxelGrid GRID = {0.2f, 0.2f, 0.2f, -51.2f, -51.2f, -5.0f, 51.2f, 51.2f, 3.0f};

static Errors check(int n, int f, uint64_t seed, Dev<float>& dp, Dev<int32_t>& dc) {
    std::vector<float> pts((size_t)n * f);
    Lcg g(seed);
    for (int p = 0; p < n; ++p) {
        float* q = pts.data() + (size_t)p * f;
        q[0] = g.uniform(-60.0f, 60.0f);
        q[1] = g.uniform(-60.0f, 60.0f);
        q[2] = g.uniform(-6.0f, 4.0f);
        for (int j = 3; j < f; ++j) q[j] = g.uniform(0.0f, 1.0f);
    }
    dp.upload(pts);
    dc.fill_bytes(0x7f);
    CHECK(voxelize_launch(dp.p, dc.p, n, f, GRID, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<int32_t> got = dc.download();
    const int gx = (int)std::round((GRID.x_max - GRID.x_min) / GRID.voxel_x);
    const int gy = (int)std::round((GRID.y_max - GRID.y_min) / GRID.voxel_y);
    const int gz = (int)std::round((GRID.z_max - GRID.z_min) / GRID.voxel_z);
    return par_check(n, [&](long long p, Errors& e) {
        const float* q = pts.data() + (size_t)p * f;
        int cx = (int)std::floor((q[0] - GRID.x_min) / GRID.voxel_x);
        int cy = (int)std::floor((q[1] - GRID.y_min) / GRID.voxel_y);
        int cz = (int)std::floor((q[2] - GRID.z_min) / GRID.voxel_z);
        int want[3] = {cz, cy, cx};
        if (cx < 0 || cx >= gx || cy < 0 || cy >= gy || cz < 0 || cz >= gz) want[0] = want[1] = want[2] = -1;
        for (int j = 0; j < 3; ++j) e.add("coors", p * 3 + j, got[(size_t)p * 3 + j], want[j], 0.0, 0.0);
    });
}

int main(int argc, char** argv) {
    int n = arg_int(argc, argv, 1, 4194304), f = arg_int(argc, argv, 2, 4), reps = arg_int(argc, argv, 3, 100);
    if (f < 3) {
        std::fprintf(stderr, "points need at least 3 features\n");
        return 2;
    }
    Errors odd;
    {
        Dev<float> p(1001 * 5);
        Dev<int32_t> c(1001 * 3);
        odd = check(1001, 5, 7, p, c);
    }
    Dev<float> p((size_t)n * f);
    Dev<int32_t> c((size_t)n * 3);
    Errors serving = check(n, f, 11, p, c);
    require_correct(odd, serving, "1001x5", std::to_string(n) + "x" + std::to_string(f));
    Timing t = time_launches([&] { return voxelize_launch(p.p, c.p, n, f, GRID, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, (double)n * (3 * 4 + 3 * 4), "\"points\": " + std::to_string(n) + ", \"features\": " + std::to_string(f));
    return 0;
}
