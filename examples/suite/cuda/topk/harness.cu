// Harness of the top-k task: every value and index at an odd shape (3 rows x 1001, k = 7, values on a
// coarse grid so that many are equal and the index order of ties is tested) and at the serving shape
// (default 64 rows x 128256, the Llama-3 vocabulary, k = 16) against std::partial_sort with the same
// order, then the serving shape timed. Usage: ./topk/bench [rows=64] [vocab=128256] [k=16] [reps=100]
// Values and indices must be equal exactly.
#include "common/bench.h"
#include "topk.h"

static Errors check(int rows, int vocab, int k, uint64_t seed, bool coarse, Dev<float>& dx, Dev<float>& dv,
                    Dev<int32_t>& di) {
    std::vector<float> x = random_f32((size_t)rows * vocab, seed, -10.0f, 10.0f);
    if (coarse)
        for (auto& v : x) v = std::floor(v * 0.5f) * 0.5f;  // 20 distinct values: ties everywhere
    dx.upload(x);
    dv.fill_bytes(0xff);
    di.fill_bytes(0xff);
    CHECK(topk_launch(dx.p, dv.p, di.p, rows, vocab, k, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<float> vals = dv.download();
    std::vector<int32_t> idx = di.download();
    return par_check(rows, [&](long long r, Errors& e) {
        std::vector<int> order(vocab);
        const float* xr = x.data() + (size_t)r * vocab;
        for (int c = 0; c < vocab; ++c) order[c] = c;
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int a, int b) { return xr[a] > xr[b] || (xr[a] == xr[b] && a < b); });
        for (int j = 0; j < k; ++j) {
            long long o = (long long)r * k + j;
            e.add("vals", o, vals[o], xr[order[j]], 0.0, 0.0);
            e.add("idx", o, idx[o], order[j], 0.0, 0.0);
        }
    });
}

int main(int argc, char** argv) {
    int rows = arg_int(argc, argv, 1, 64), vocab = arg_int(argc, argv, 2, 128256), k = arg_int(argc, argv, 3, 16);
    int reps = arg_int(argc, argv, 4, 100);
    if (k > vocab) {
        std::fprintf(stderr, "k must be at most vocab\n");
        return 2;
    }
    Errors odd;
    {
        Dev<float> x(3 * 1001), v(3 * 7);
        Dev<int32_t> i(3 * 7);
        odd = check(3, 1001, 7, 7, true, x, v, i);
    }
    Dev<float> x((size_t)rows * vocab), v((size_t)rows * k);
    Dev<int32_t> i((size_t)rows * k);
    Errors serving = check(rows, vocab, k, 11, false, x, v, i);
    require_correct(odd, serving, "3x1001,k=7", std::to_string(rows) + "x" + std::to_string(vocab) + ",k=" + std::to_string(k));
    Timing t = time_launches([&] { return topk_launch(x.p, v.p, i.p, rows, vocab, k, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, (double)rows * vocab * 4,
             "\"rows\": " + std::to_string(rows) + ", \"vocab\": " + std::to_string(vocab) + ", \"k\": " + std::to_string(k));
    return 0;
}
