// Harness of the paged KV-cache write task: every element of both caches (written slots and untouched
// ones) at an odd shape (7 tokens, 3 KV heads, head_size 36, two padding tokens) and at the serving shape
// (default a prefill chunk of 8192 tokens, 8 KV heads, head_size 128, block_size 16, slots scattered
// over twice as many cache blocks) against a CPU reference, then the serving shape timed.
// Usage: ./kv_cache_write/bench [tokens=8192] [kv_heads=8] [head_size=128] [block_size=16] [reps=100]
// Elements must be equal exactly.
#include "common/bench.h"
#include "kv_cache_write.h"

static Errors check(int tokens, int heads, int hs, int bs, uint64_t seed, bool padding, Dev<uint16_t>& dk,
                    Dev<uint16_t>& dv, Dev<uint16_t>& dkc, Dev<uint16_t>& dvc, Dev<int64_t>& dslots) {
    const size_t row = (size_t)heads * hs, slots_total = dkc.n / row;
    std::vector<uint16_t> k = random_bf16(dk.n, seed, -2.0f, 2.0f), v = random_bf16(dv.n, seed + 1, -2.0f, 2.0f);
    std::vector<int64_t> perm(slots_total);  // distinct slots: a random permutation's first `tokens`
    for (size_t i = 0; i < slots_total; ++i) perm[i] = (int64_t)i;
    Lcg g(seed + 2);
    for (size_t i = slots_total - 1; i > 0; --i) std::swap(perm[i], perm[g.next24() % (i + 1)]);
    std::vector<int64_t> slots(perm.begin(), perm.begin() + tokens);
    if (padding) slots[1] = slots[tokens - 1] = -1;
    std::vector<uint16_t> kc = random_bf16(dkc.n, seed + 3, -1.0f, 1.0f), vc = random_bf16(dvc.n, seed + 4, -1.0f, 1.0f);
    dk.upload(k);
    dv.upload(v);
    dkc.upload(kc);
    dvc.upload(vc);
    dslots.upload(slots);
    CHECK(kv_cache_write_launch(dk.p, dv.p, dkc.p, dvc.p, dslots.p, tokens, heads, hs, bs, 0));
    CHECK(GPU(DeviceSynchronize)());
    for (int t = 0; t < tokens; ++t)
        if (slots[t] >= 0)
            for (size_t i = 0; i < row; ++i) {
                kc[(size_t)slots[t] * row + i] = k[(size_t)t * row + i];
                vc[(size_t)slots[t] * row + i] = v[(size_t)t * row + i];
            }
    std::vector<uint16_t> gk = dkc.download(), gv = dvc.download();
    return par_check((long long)gk.size(), [&](long long i, Errors& e) {
        e.add("key_cache", i, gk[i], kc[i], 0.0, 0.0);
        e.add("value_cache", i, gv[i], vc[i], 0.0, 0.0);
    });
}

int main(int argc, char** argv) {
    int tokens = arg_int(argc, argv, 1, 8192), heads = arg_int(argc, argv, 2, 8), hs = arg_int(argc, argv, 3, 128);
    int bs = arg_int(argc, argv, 4, 16), reps = arg_int(argc, argv, 5, 100);
    Errors odd;
    {
        const int t = 7, h = 3, d = 36, b = 16;
        const size_t cache = (size_t)2 * b * h * d;  // 2 blocks of 16 slots
        Dev<uint16_t> k((size_t)t * h * d), v((size_t)t * h * d), kc(cache), vc(cache);
        Dev<int64_t> s(t);
        odd = check(t, h, d, b, 7, true, k, v, kc, vc, s);
    }
    const size_t row = (size_t)heads * hs;
    const size_t blocks = 2 * (((size_t)tokens + bs - 1) / bs);
    Dev<uint16_t> k(tokens * row), v(tokens * row), kc(blocks * bs * row), vc(blocks * bs * row);
    Dev<int64_t> s(tokens);
    Errors serving = check(tokens, heads, hs, bs, 11, false, k, v, kc, vc, s);
    require_correct(odd, serving, "7x3x36", std::to_string(tokens) + "x" + std::to_string(heads) + "x" + std::to_string(hs));
    Timing t = time_launches([&] { return kv_cache_write_launch(k.p, v.p, kc.p, vc.p, s.p, tokens, heads, hs, bs, 0); }, reps);
    odd.merge(serving);
    print_ok(odd, t, 4.0 * tokens * row * 2 + tokens * 8.0, "\"tokens\": " + std::to_string(tokens));
    return 0;
}
