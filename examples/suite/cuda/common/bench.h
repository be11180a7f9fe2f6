// Harness helpers shared by the suite's tasks: device buffers, deterministic inputs, the element-wise
// check against a CPU reference, event timing, and the result line `synth rewrite` reads:
//
//   GEMMSYNTH_RESULT {"correct": true, "max_abs_err": ..., "mismatches": 0, "checked": ..., "latency_us": ...}
//
// Exit status of a harness: 0 correct, 1 wrong result, 2 GPU error or bad arguments.
#pragma once
#include "gpu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

inline std::string num(double x) {  // JSON has no inf/nan
    if (!std::isfinite(x)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", x);
    return b;
}

inline void gpu_fail(const char* what, gpuError_t e) {
    std::fprintf(stderr, "GPU error in %s: %s\n", what, GPU(GetErrorString)(e));
    std::printf("GEMMSYNTH_RESULT {\"correct\": false, \"error\": \"%s failed: %s\"}\n", what, GPU(GetErrorString)(e));
    std::fflush(stdout);
    std::exit(2);
}
#define CHECK(call)                                  \
    do {                                             \
        gpuError_t e_ = (call);                      \
        if (e_ != gpuSuccess) gpu_fail(#call, e_);   \
    } while (0)

// A device buffer of n elements, freed at the end of its scope.
template <typename T>
struct Dev {
    T* p = nullptr;
    size_t n = 0;
    explicit Dev(size_t count) : n(count) { CHECK(GPU(Malloc)(&p, std::max<size_t>(n, 1) * sizeof(T))); }
    Dev(const Dev&) = delete;
    Dev& operator=(const Dev&) = delete;
    ~Dev() { (void)GPU(Free)(p); }
    void upload(const std::vector<T>& h) { CHECK(GPU(Memcpy)(p, h.data(), n * sizeof(T), GPU(MemcpyHostToDevice))); }
    std::vector<T> download() const {
        std::vector<T> h(n);
        CHECK(GPU(Memcpy)(h.data(), p, n * sizeof(T), GPU(MemcpyDeviceToHost)));
        return h;
    }
    void fill_bytes(int byte) { CHECK(GPU(Memset)(p, byte, n * sizeof(T))); }
};

// A fixed 64-bit LCG: uniform floats in [lo, hi).
struct Lcg {
    uint64_t s;
    explicit Lcg(uint64_t seed) : s(seed * 6364136223846793005ull + 1442695040888963407ull) {}
    uint32_t next24() {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return (uint32_t)((s >> 40) & 0xffffff);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * ((float)next24() / 16777216.0f); }
};

// Runs body(i) for i in [0, n) on all cores, in contiguous chunks (chunk c holds indices below chunk c+1's).
template <typename F>
void parallel_chunks(long long n, F body) {
    const long long threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 64u));
    const long long chunk = (n + threads - 1) / threads;
    std::vector<std::thread> pool;
    for (long long t = 0; t < threads && t * chunk < n; ++t)
        pool.emplace_back([&, t] {
            for (long long i = t * chunk, end = std::min(n, (t + 1) * chunk); i < end; ++i) body(t, i);
        });
    for (auto& th : pool) th.join();
}

// Uniform float in [lo, hi) for element i of a stream (a hash of seed and index: fills in parallel).
inline float uniform_at(uint64_t seed, uint64_t i, float lo, float hi) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * ((float)(z >> 40) / 16777216.0f);
}

inline std::vector<uint16_t> random_bf16(size_t n, uint64_t seed, float lo, float hi) {
    std::vector<uint16_t> v(n);
    parallel_chunks((long long)n, [&](long long, long long i) { v[i] = float_to_bf16(uniform_at(seed, i, lo, hi)); });
    return v;
}

inline std::vector<float> random_f32(size_t n, uint64_t seed, float lo, float hi) {
    std::vector<float> v(n);
    parallel_chunks((long long)n, [&](long long, long long i) { v[i] = uniform_at(seed, i, lo, hi); });
    return v;
}

// Element-wise comparison: an element passes when |got - ref| <= atol + rtol * |ref| (NaN never passes).
struct Errors {
    double max_abs = 0, max_rel = 0;
    long long mismatches = 0, checked = 0, first_bad = -1;
    double first_got = 0, first_ref = 0;
    std::string first_what;

    void add(const char* what, long long i, double got, double ref, double atol, double rtol) {
        double err = std::fabs(got - ref);
        ++checked;
        if (!(err <= atol + rtol * std::fabs(ref))) {
            if (first_bad < 0) {
                first_bad = i;
                first_got = got;
                first_ref = ref;
                first_what = what;
            }
            ++mismatches;
        }
        if (std::isnan(err)) err = INFINITY;
        max_abs = std::max(max_abs, err);
        if (ref != 0) max_rel = std::max(max_rel, err / std::fabs(ref));
    }
    void merge(const Errors& o) {
        if (first_bad < 0 && o.first_bad >= 0) {
            first_bad = o.first_bad;
            first_got = o.first_got;
            first_ref = o.first_ref;
            first_what = o.first_what;
        }
        mismatches += o.mismatches;
        checked += o.checked;
        max_abs = std::max(max_abs, o.max_abs);
        max_rel = std::max(max_rel, o.max_rel);
    }
    std::string json() const {
        return "\"max_abs_err\": " + num(max_abs) + ", \"max_rel_err\": " + num(max_rel) + ", \"mismatches\": " +
               std::to_string(mismatches) + ", \"checked\": " + std::to_string(checked);
    }
};

// Runs body(i, errors) for each item i in [0, n) (a row, a group, ...) on all cores and merges the
// errors in index order, so the first mismatch named is the lowest-indexed one.
template <typename F>
Errors par_check(long long n, F body) {
    std::vector<Errors> part(64);
    parallel_chunks(n, [&](long long t, long long i) { body(i, part[t]); });
    Errors all;
    for (const Errors& e : part) all.merge(e);
    return all;
}

// Both shapes' checks; on a mismatch prints the failing result line and exits 1.
inline void require_correct(Errors odd, const Errors& serving, const std::string& odd_shape,
                            const std::string& serving_shape) {
    const bool odd_bad = odd.mismatches > 0;
    const Errors& bad = odd_bad ? odd : serving;
    const std::string& shape = odd_bad ? odd_shape : serving_shape;
    odd.merge(serving);
    if (odd.mismatches == 0) return;
    std::fprintf(stderr, "first mismatch (%s, shape %s): element %lld got %g expected %g\n", bad.first_what.c_str(),
                 shape.c_str(), bad.first_bad, bad.first_got, bad.first_ref);
    std::printf("GEMMSYNTH_RESULT {\"correct\": false, %s, \"bad_shape\": \"%s\", \"bad_output\": \"%s\", "
                "\"first_bad_index\": %lld, \"first_bad_got\": %s, \"first_bad_expected\": %s}\n",
                odd.json().c_str(), shape.c_str(), bad.first_what.c_str(), bad.first_bad, num(bad.first_got).c_str(),
                num(bad.first_ref).c_str());
    std::fflush(stdout);
    std::exit(1);
}

struct Timing {
    double median_us = 0, min_us = 0, mean_us = 0, p90_us = 0;
    int reps = 0;
};

// `warmup` launches, then `reps` launches each between its own pair of events; the median is the latency.
template <typename F>
Timing time_launches(F launch, int reps, int warmup = 10) {
    for (int i = 0; i < warmup; ++i) CHECK(launch());
    std::vector<GPU(Event_t)> ev(2 * reps);
    for (auto& e : ev) CHECK(GPU(EventCreate)(&e));
    for (int i = 0; i < reps; ++i) {
        CHECK(GPU(EventRecord)(ev[2 * i], 0));
        CHECK(launch());
        CHECK(GPU(EventRecord)(ev[2 * i + 1], 0));
    }
    CHECK(GPU(DeviceSynchronize)());
    std::vector<double> us(reps);
    for (int i = 0; i < reps; ++i) {
        float ms = 0;
        CHECK(GPU(EventElapsedTime)(&ms, ev[2 * i], ev[2 * i + 1]));
        us[i] = ms * 1000.0;
    }
    for (auto& e : ev) CHECK(GPU(EventDestroy)(e));
    std::sort(us.begin(), us.end());
    Timing t;
    t.reps = reps;
    t.median_us = us[reps / 2];
    t.min_us = us[0];
    t.p90_us = us[(reps * 9) / 10];
    for (double u : us) t.mean_us += u / reps;
    return t;
}

// The correct result line: the checks, the timing, bytes moved per launch and their rate.
inline void print_ok(const Errors& all, const Timing& t, double bytes, const std::string& extra) {
    gpuDeviceProp prop;
    CHECK(GPU(GetDeviceProperties)(&prop, 0));
    std::printf("GEMMSYNTH_RESULT {\"correct\": true, %s, \"latency_us\": %s, \"latency_us_min\": %s, "
                "\"latency_us_mean\": %s, \"latency_us_p90\": %s, \"reps\": %d, \"bytes\": %.0f, \"gbps\": %s, "
                "%s\"device\": \"%s\"}\n",
                all.json().c_str(), num(t.median_us).c_str(), num(t.min_us).c_str(), num(t.mean_us).c_str(),
                num(t.p90_us).c_str(), t.reps, bytes, num(bytes / t.median_us / 1e3).c_str(),
                extra.empty() ? "" : (extra + ", ").c_str(), prop.name);
}

// argv[i] as a positive int, or `dflt` when absent; exits 2 on a bad value.
inline int arg_int(int argc, char** argv, int i, int dflt) {
    if (argc <= i) return dflt;
    char* end = nullptr;
    long v = std::strtol(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || v <= 0 || v > (1L << 30)) {
        std::fprintf(stderr, "argument %d (\"%s\") must be a positive integer\n", i, argv[i]);
        std::exit(2);
    }
    return (int)v;
}

// The launch error of a kernel launch (also catches an invalid configuration).
inline gpuError_t launched() { return GPU(GetLastError)(); }
