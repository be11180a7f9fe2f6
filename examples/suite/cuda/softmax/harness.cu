// Harness of the softmax task: every element at an odd shape (5 x 1001: unaligned rows, scalar paths)
// and at the serving shape (default 4096 x 4096) against a CPU reference in double, then the serving
// shape timed. Usage: ./softmax/bench [rows=4096] [cols=4096] [reps=100]
// An element passes when |y - ref| <= 1e-4 |ref| + 1e-9 (fp32 exp within a few ulps, another
// summation order).
#include "common/bench.h"
#include "softmax.h"

static Errors check(int rows, int cols, uint64_t seed, Dev<float>& dx, Dev<float>& dy) {
    std::vector<float> x = random_f32((size_t)rows * cols, seed, -8.0f, 8.0f);
    dx.upload(x);
    dy.fill_bytes(0xff);
    CHECK(softmax_launch(dx.p, dy.p, rows, cols, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<float> y = dy.download();
    return par_check(rows, [&](long long r, Errors& e) {
        const float* xr = x.data() + r * cols;
        double m = -INFINITY, s = 0;
        for (int j = 0; j < cols; ++j) m = std::max(m, (double)xr[j]);
        for (int j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
        for (int j = 0; j < cols; ++j) e.add("y", r * cols + j, y[r * cols + j], std::exp(xr[j] - m) / s, 1e-9, 1e-4);
    });
}

int main(int argc, char** argv) {
    int rows = arg_int(argc, argv, 1, 4096), cols = arg_int(argc, argv, 2, 4096), reps = arg_int(argc, argv, 3, 100);
    Errors odd;
    {
        Dev<float> x(5 * 1001), y(5 * 1001);
        odd = check(5, 1001, 7, x, y);
    }
    Dev<float> x((size_t)rows * cols), y((size_t)rows * cols);
    Errors serving = check(rows, cols, 11, x, y);
    require_correct(odd, serving, "5x1001", std::to_string(rows) + "x" + std::to_string(cols));
    Timing t = time_launches([&] { return softmax_launch(x.p, y.p, rows, cols, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, 2.0 * rows * (double)cols * 4,
             "\"rows\": " + std::to_string(rows) + ", \"cols\": " + std::to_string(cols));
    return 0;
}
