// Harness of the FP8 per-token-group quantization task: every scale and every code at an odd shape
// (5 tokens x 384 = 3 groups a token, one group all zeros) and at the serving shape (default 4096 tokens x
// 7168, DeepSeek-V3's hidden size) against a CPU reference, then the serving shape timed.
// Usage: ./fp8_group_quant/bench [tokens=4096] [hidden=7168] [reps=100]
// The reference rounds x / scale to the nearest e4m3 value by searching the decoded code table (ties to
// the even code), independently of the kernel's bit arithmetic. A scale passes within 1e-6 relative; a
// code passes when its sign matches and its magnitude is at most one code away (a rewrite may multiply
// by 1 / scale instead of dividing).
#include "common/bench.h"
#include "fp8_group_quant.h"

static double e4m3_value(int code) {  // magnitude of an e4m3fn code 0..126
    int e = (code >> 3) & 15, m = code & 7;
    return e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
}

static int e4m3_nearest(double a) {  // a >= 0: the nearest code's magnitude, ties to the even code
    static std::vector<double> table;
    if (table.empty())
        for (int c = 0; c <= 126; ++c) table.push_back(e4m3_value(c));  // increasing with the code
    int hi = (int)(std::lower_bound(table.begin(), table.end(), a) - table.begin());
    if (hi == 0) return 0;
    if (hi > 126) return 126;
    int lo = hi - 1;
    double dl = a - table[lo], dh = table[hi] - a;
    return dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
}

static Errors check(int tokens, int hidden, uint64_t seed, bool zero_group, Dev<uint16_t>& dx, Dev<uint8_t>& dq,
                    Dev<float>& ds) {
    size_t n = (size_t)tokens * hidden;
    std::vector<uint16_t> x(n);
    Lcg g(seed);
    for (size_t i = 0; i < n; ++i) {  // magnitudes over several octaves per group
        float mag = std::ldexp(1.0f, (int)(g.next24() % 12) - 6);
        x[i] = float_to_bf16(g.uniform(-1.0f, 1.0f) * mag);
    }
    if (zero_group)
        for (int i = 0; i < FP8_GROUP; ++i) x[FP8_GROUP + i] = 0;
    dx.upload(x);
    dq.fill_bytes(0x7f);  // NaN codes: codes never written fail
    ds.fill_bytes(0xff);
    CHECK(fp8_group_quant_launch(dx.p, dq.p, ds.p, tokens, hidden, 0));
    CHECK(GPU(DeviceSynchronize)());
    std::vector<uint8_t> q = dq.download();
    std::vector<float> s = ds.download();
    e4m3_nearest(0.0);  // builds the code table before the threads read it
    return par_check((long long)(n / FP8_GROUP), [&](long long grp, Errors& e) {
        float amax = 0;
        for (int i = 0; i < FP8_GROUP; ++i) amax = std::max(amax, std::fabs(bf16_to_float(x[grp * FP8_GROUP + i])));
        float sc = std::max(amax, 1e-10f) / 448.0f;
        e.add("scale", (long long)grp, s[grp], sc, 0.0, 1e-6);
        for (int i = 0; i < FP8_GROUP; ++i) {
            size_t k = grp * FP8_GROUP + i;
            float v = std::min(std::max(bf16_to_float(x[k]) / sc, -448.0f), 448.0f);
            int want = e4m3_nearest(std::fabs(v)), got = q[k] & 0x7f;
            bool sign_ok = want == 0 || (q[k] >> 7) == (v < 0 ? 1 : 0);
            bool ok = got != 0x7f && sign_ok && std::abs(got - want) <= 1;
            // A failing code is reported as its magnitude code, plus 1000 when the sign is wrong.
            e.add("q", (long long)k, ok ? want : got + 1000 * !sign_ok, want, 0.0, 0.0);
        }
    });
}

int main(int argc, char** argv) {
    int tokens = arg_int(argc, argv, 1, 4096), hidden = arg_int(argc, argv, 2, 7168), reps = arg_int(argc, argv, 3, 100);
    if (hidden % FP8_GROUP) {
        std::fprintf(stderr, "hidden must be a multiple of %d\n", FP8_GROUP);
        return 2;
    }
    Errors odd;
    {
        Dev<uint16_t> x(5 * 384);
        Dev<uint8_t> q(5 * 384);
        Dev<float> s(5 * 3);
        odd = check(5, 384, 7, true, x, q, s);
    }
    size_t n = (size_t)tokens * hidden;
    Dev<uint16_t> x(n);
    Dev<uint8_t> q(n);
    Dev<float> s(n / FP8_GROUP);
    Errors serving = check(tokens, hidden, 11, false, x, q, s);
    require_correct(odd, serving, "5x384", std::to_string(tokens) + "x" + std::to_string(hidden));
    Timing t = time_launches([&] { return fp8_group_quant_launch(x.p, q.p, s.p, tokens, hidden, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, 3.0 * n + 4.0 * n / FP8_GROUP,
             "\"tokens\": " + std::to_string(tokens) + ", \"hidden\": " + std::to_string(hidden));
    return 0;
}
