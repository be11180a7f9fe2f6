// Harness of the fused residual-add + RMSNorm task: both outputs (the new residual and the normalized x),
// every element, at an odd shape (5 x 1003: scalar paths) and at the serving shape (default 4096 x 8192)
// against a CPU reference, then the serving shape timed (in place: each timed call adds again).
// Usage: ./fused_add_rmsnorm/bench [rows=4096] [hidden=8192] [reps=100]
// The residual must equal bf16(x + residual) within one bf16 rounding; the output passes when
// |out - ref| <= 2^-7 |ref| + 1e-6.
#include "common/bench.h"
#include "fused_add_rmsnorm.h"

static const float EPS = 1e-6f;

static Errors check(int rows, int hidden, uint64_t seed, Dev<uint16_t>& dx, Dev<uint16_t>& dr, Dev<uint16_t>& dw) {
    size_t n = (size_t)rows * hidden;
    std::vector<uint16_t> x = random_bf16(n, seed, -3.0f, 3.0f), res = random_bf16(n, seed + 1, -3.0f, 3.0f);
    std::vector<uint16_t> w = random_bf16(hidden, seed + 2, 0.5f, 1.5f);
    dx.upload(x);
    dr.upload(res);
    dw.upload(w);
    CHECK(fused_add_rmsnorm_launch(dx.p, dr.p, dw.p, rows, hidden, EPS, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<uint16_t> out = dx.download(), res_out = dr.download();
    return par_check(rows, [&](long long r, Errors& e) {
        std::vector<float> sum(hidden);
        double ss = 0;
        for (int i = 0; i < hidden; ++i) {
            size_t k = (size_t)r * hidden + i;
            sum[i] = bf16_to_float(float_to_bf16(bf16_to_float(x[k]) + bf16_to_float(res[k])));
            ss += (double)sum[i] * sum[i];
            e.add("residual", (long long)k, bf16_to_float(res_out[k]), sum[i], 0.0, 0x1p-8);
        }
        double inv = 1.0 / std::sqrt(ss / hidden + EPS);
        for (int i = 0; i < hidden; ++i) {
            size_t k = (size_t)r * hidden + i;
            e.add("out", (long long)k, bf16_to_float(out[k]), sum[i] * inv * bf16_to_float(w[i]), 1e-6, 0x1p-7);
        }
    });
}

int main(int argc, char** argv) {
    int rows = arg_int(argc, argv, 1, 4096), hidden = arg_int(argc, argv, 2, 8192), reps = arg_int(argc, argv, 3, 100);
    Errors odd;
    {
        Dev<uint16_t> x(5 * 1003), r(5 * 1003), w(1003);
        odd = check(5, 1003, 7, x, r, w);
    }
    size_t n = (size_t)rows * hidden;
    Dev<uint16_t> x(n), r(n), w(hidden);
    Errors serving = check(rows, hidden, 11, x, r, w);
    require_correct(odd, serving, "5x1003", std::to_string(rows) + "x" + std::to_string(hidden));
    Timing t = time_launches([&] { return fused_add_rmsnorm_launch(x.p, r.p, w.p, rows, hidden, EPS, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, 4.0 * n * 2 + hidden * 2.0,
             "\"rows\": " + std::to_string(rows) + ", \"hidden\": " + std::to_string(hidden));
    return 0;
}
