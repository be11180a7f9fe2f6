// Harness of the SwiGLU task: every element at an odd shape (3 x 1003: scalar paths) and at the serving
// shape (default 4096 tokens x 14336 columns, the Llama-3-8B MLP) against a CPU reference, then the
// serving shape timed. Usage: ./swiglu/bench [rows=4096] [cols=14336] [reps=100]
// An element passes when |out - ref| <= 2^-7 |ref| + 1e-5 (one bf16 rounding plus the fast exp).
#include "common/bench.h"
#include "swiglu.h"

static Errors check(int rows, int cols, uint64_t seed, Dev<uint16_t>& din, Dev<uint16_t>& dout) {
    std::vector<uint16_t> in = random_bf16((size_t)rows * 2 * cols, seed, -4.0f, 4.0f);
    din.upload(in);
    dout.fill_bytes(0xff);
    CHECK(swiglu_launch(din.p, dout.p, rows, cols, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<uint16_t> out = dout.download();
    return par_check(rows, [&](long long r, Errors& e) {
        for (long long c = 0; c < cols; ++c) {
            float x = bf16_to_float(in[r * 2 * cols + c]), y = bf16_to_float(in[r * 2 * cols + cols + c]);
            float ref = x / (1.0f + std::exp(-x)) * y;
            e.add("out", r * cols + c, bf16_to_float(out[r * cols + c]), ref, 1e-5, 0x1p-7);
        }
    });
}

int main(int argc, char** argv) {
    int rows = arg_int(argc, argv, 1, 4096), cols = arg_int(argc, argv, 2, 14336), reps = arg_int(argc, argv, 3, 100);
    Errors odd;
    {
        Dev<uint16_t> in(3 * 2 * 1003), out(3 * 1003);
        odd = check(3, 1003, 7, in, out);
    }
    Dev<uint16_t> in((size_t)rows * 2 * cols), out((size_t)rows * cols);
    Errors serving = check(rows, cols, 11, in, out);
    require_correct(odd, serving, "3x1003", std::to_string(rows) + "x" + std::to_string(cols));
    Timing t = time_launches([&] { return swiglu_launch(in.p, out.p, rows, cols, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, 3.0 * rows * (double)cols * 2,
             "\"rows\": " + std::to_string(rows) + ", \"cols\": " + std::to_string(cols));
    return 0;
}
