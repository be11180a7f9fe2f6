// Harness of the RMSNorm task: every element at an odd shape (5 x 1003: scalar paths) and at the serving
// shape (default 4096 tokens x hidden 8192) against a CPU reference, then the serving shape timed.
// Usage: ./rmsnorm/bench [rows=4096] [hidden=8192] [reps=100]
// An element passes when |out - ref| <= 2^-7 |ref| + 1e-6 (one bf16 rounding is up to 2^-8 relative;
// the bound allows that and a different fp32 summation order).
#include "common/bench.h"
#include "rmsnorm.h"

static const float EPS = 1e-6f;

static Errors check(int rows, int hidden, uint64_t seed, Dev<uint16_t>* keep_x, Dev<uint16_t>* keep_w,
                    Dev<uint16_t>* keep_out) {
    std::vector<uint16_t> x = random_bf16((size_t)rows * hidden, seed, -3.0f, 3.0f);
    std::vector<uint16_t> w = random_bf16(hidden, seed + 1, 0.5f, 1.5f);
    Dev<uint16_t> dx(x.size()), dw(w.size()), dout(x.size());
    Dev<uint16_t>& rx = keep_x ? *keep_x : dx;
    Dev<uint16_t>& rw = keep_w ? *keep_w : dw;
    Dev<uint16_t>& ro = keep_out ? *keep_out : dout;
    rx.upload(x);
    rw.upload(w);
    ro.fill_bytes(0xff);  // NaN: elements never written fail
    CHECK(rmsnorm_launch(rx.p, rw.p, ro.p, rows, hidden, EPS, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<uint16_t> out = ro.download();
    return par_check(rows, [&](long long r, Errors& e) {
        double ss = 0;
        for (int i = 0; i < hidden; ++i) {
            double f = bf16_to_float(x[(size_t)r * hidden + i]);
            ss += f * f;
        }
        double inv = 1.0 / std::sqrt(ss / hidden + EPS);
        for (int i = 0; i < hidden; ++i) {
            size_t k = (size_t)r * hidden + i;
            double ref = bf16_to_float(x[k]) * inv * bf16_to_float(w[i]);
            e.add("out", (long long)k, bf16_to_float(out[k]), ref, 1e-6, 0x1p-7);
        }
    });
}

int main(int argc, char** argv) {
    int rows = arg_int(argc, argv, 1, 4096), hidden = arg_int(argc, argv, 2, 8192), reps = arg_int(argc, argv, 3, 100);
    Errors odd = check(5, 1003, 7, nullptr, nullptr, nullptr);
    size_t n = (size_t)rows * hidden;
    Dev<uint16_t> x(n), w(hidden), out(n);
    Errors serving = check(rows, hidden, 11, &x, &w, &out);
    require_correct(odd, serving, "5x1003", std::to_string(rows) + "x" + std::to_string(hidden));
    Timing t = time_launches([&] { return rmsnorm_launch(x.p, w.p, out.p, rows, hidden, EPS, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, 2.0 * n * 2 + hidden * 2.0,
             "\"rows\": " + std::to_string(rows) + ", \"hidden\": " + std::to_string(hidden));
    return 0;
}
