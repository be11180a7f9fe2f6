// Harness of the rotary-embedding task: every element of q and k at an odd shape (7 tokens, 3 query heads,
// 1 key head, head_dim 72: half = 36, so 8-pair accesses fall back) and at the serving shape (default
// 4096 tokens, 32 query heads, 8 key heads, head_dim 128, Llama-3-8B) against a CPU reference, then the
// serving shape timed (in place: each timed call rotates again).
// Usage: ./rope/bench [tokens=4096] [q_heads=32] [kv_heads=8] [head_dim=128] [reps=100]
// An element passes when |out - ref| <= 2^-7 |ref| + 1e-5 (|x1| + |x2|): one bf16 rounding, plus fp32
// rounding differences (fused multiply-adds) where the two products cancel.
#include "common/bench.h"
#include "rope.h"

static const int MAX_POS = 8192;

struct Rope {
    int tokens, qh, kh, hd;
    std::vector<int64_t> pos;
    std::vector<float> cs;
    Dev<int64_t> dpos;
    Dev<float> dcs;
    Dev<uint16_t> dq, dk;
    Rope(int t, int q, int k, int d)
        : tokens(t), qh(q), kh(k), hd(d), dpos(t), dcs((size_t)MAX_POS * d), dq((size_t)t * q * d), dk((size_t)t * k * d) {}
};

static void rotate_ref(const std::vector<uint16_t>& in, std::vector<double>& ref, std::vector<double>& mag,
                       const Rope& r, int heads) {
    const int half = r.hd / 2;
    ref.assign(in.size(), 0);
    mag.assign(in.size(), 0);
    parallel_chunks(r.tokens, [&](long long, long long t) {
        for (int h = 0; h < heads; ++h) {
            size_t base = ((size_t)t * heads + h) * r.hd;
            const float* cs = r.cs.data() + (size_t)r.pos[t] * r.hd;
            for (int i = 0; i < half; ++i) {
                double x1 = bf16_to_float(in[base + i]), x2 = bf16_to_float(in[base + half + i]);
                ref[base + i] = x1 * cs[i] - x2 * cs[half + i];
                ref[base + half + i] = x2 * cs[i] + x1 * cs[half + i];
                mag[base + i] = mag[base + half + i] = std::fabs(x1) + std::fabs(x2);
            }
        }
    });
}

static Errors check(Rope& r, uint64_t seed) {
    Lcg g(seed);
    r.pos.resize(r.tokens);
    for (auto& p : r.pos) p = g.next24() % MAX_POS;
    r.cs.resize((size_t)MAX_POS * r.hd);
    const int half = r.hd / 2;
    for (int p = 0; p < MAX_POS; ++p)
        for (int i = 0; i < half; ++i) {
            double angle = p * std::pow(10000.0, -2.0 * i / r.hd);
            r.cs[(size_t)p * r.hd + i] = (float)std::cos(angle);
            r.cs[(size_t)p * r.hd + half + i] = (float)std::sin(angle);
        }
    std::vector<uint16_t> q = random_bf16(r.dq.n, seed + 1, -4.0f, 4.0f), k = random_bf16(r.dk.n, seed + 2, -4.0f, 4.0f);
    r.dpos.upload(r.pos);
    r.dcs.upload(r.cs);
    r.dq.upload(q);
    r.dk.upload(k);
    CHECK(rope_launch(r.dpos.p, r.dq.p, r.dk.p, r.dcs.p, r.tokens, r.qh, r.kh, r.hd, 0));
    CHECK(GPU(DeviceSynchronize)());
    Errors e;
    std::vector<double> ref, mag;
    const char* names[2] = {"q", "k"};
    const std::vector<uint16_t>* ins[2] = {&q, &k};
    Dev<uint16_t>* devs[2] = {&r.dq, &r.dk};
    for (int which = 0; which < 2; ++which) {
        rotate_ref(*ins[which], ref, mag, r, which == 0 ? r.qh : r.kh);
        std::vector<uint16_t> got = devs[which]->download();
        e.merge(par_check((long long)got.size(), [&](long long i, Errors& pe) {
            pe.add(names[which], i, bf16_to_float(got[i]), ref[i], 1e-5 * mag[i], 0x1p-7);
        }));
    }
    return e;
}

int main(int argc, char** argv) {
    int tokens = arg_int(argc, argv, 1, 4096), qh = arg_int(argc, argv, 2, 32), kh = arg_int(argc, argv, 3, 8);
    int hd = arg_int(argc, argv, 4, 128), reps = arg_int(argc, argv, 5, 100);
    if (hd % 2) {
        std::fprintf(stderr, "head_dim must be even\n");
        return 2;
    }
    Errors odd;
    {
        Rope small(7, 3, 1, 72);
        odd = check(small, 7);
    }
    Rope r(tokens, qh, kh, hd);
    Errors serving = check(r, 11);
    std::string shape = std::to_string(tokens) + "x(" + std::to_string(qh) + "+" + std::to_string(kh) + ")x" +
                        std::to_string(hd);
    require_correct(odd, serving, "7x(3+1)x72", shape);
    Timing t = time_launches(
        [&] { return rope_launch(r.dpos.p, r.dq.p, r.dk.p, r.dcs.p, tokens, qh, kh, hd, 0); }, reps);
    odd.merge(serving);
    double elems = (double)tokens * (qh + kh) * hd;
    print_ok(odd, t, elems * 2 * 2 + (double)tokens * (hd * 4 + 8), "\"tokens\": " + std::to_string(tokens));
    return 0;
}
