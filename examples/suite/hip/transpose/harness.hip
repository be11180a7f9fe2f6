// Harness of the transpose task: every element at an odd shape (37 x 1003: partial tiles) and at the
// serving shape (default 4096 x 8192 fp32, 128 MiB each way) against a CPU reference, then the serving
// shape timed. Usage: ./transpose/bench [rows=4096] [cols=8192] [reps=100]
// Elements must be equal exactly.
#include "common/bench.h"
#include "transpose.h"

static Errors check(int rows, int cols, uint64_t seed, Dev<float>& din, Dev<float>& dout) {
    std::vector<float> in = random_f32((size_t)rows * cols, seed, -1.0f, 1.0f);
    din.upload(in);
    dout.fill_bytes(0xff);
    CHECK(transpose_launch(din.p, dout.p, rows, cols, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<float> out = dout.download();
    return par_check(cols, [&](long long c, Errors& e) {
        for (long long r = 0; r < rows; ++r) e.add("out", c * rows + r, out[c * rows + r], in[r * cols + c], 0.0, 0.0);
    });
}

int main(int argc, char** argv) {
    int rows = arg_int(argc, argv, 1, 4096), cols = arg_int(argc, argv, 2, 8192), reps = arg_int(argc, argv, 3, 100);
    Errors odd;
    {
        Dev<float> in(37 * 1003), out(37 * 1003);
        odd = check(37, 1003, 7, in, out);
    }
    Dev<float> in((size_t)rows * cols), out((size_t)rows * cols);
    Errors serving = check(rows, cols, 11, in, out);
    require_correct(odd, serving, "37x1003", std::to_string(rows) + "x" + std::to_string(cols));
    Timing t = time_launches([&] { return transpose_launch(in.p, out.p, rows, cols, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, 2.0 * rows * (double)cols * 4,
             "\"rows\": " + std::to_string(rows) + ", \"cols\": " + std::to_string(cols));
    return 0;
}
