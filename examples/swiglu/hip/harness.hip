// Test harness for the SwiGLU kernel (HIP): checks swiglu_launch against a CPU float reference, times
// it with HIP events, and prints one result line for `synth rewrite`:
//
//   GEMMSYNTH_RESULT {"correct": true, "max_abs_err": ..., "latency_us": ..., "gbps": ..., ...}
//
// Usage: ./swiglu [rows=8192] [cols=12800] [reps=200]
// Correctness: every element of a small odd shape (3 x 1003: unaligned rows, scalar paths) and of the
// timed shape must satisfy |out - ref| <= 2^-7 * |ref| + 1e-5, ref = SiLU(x) * y computed in float from
// the same bf16 inputs (bf16 keeps 8 significant bits: one rounding of the result costs up to 2^-8
// relative, so the bound allows that rounding plus the fast exp with a 2x margin).
// Latency: median over `reps` launches, each between its own pair of events, after 20 warm-up launches.
// gbps = bytes moved (gate_up read + out written) / latency; copy_gbps = the same device's
// device-to-device copy bandwidth (read + write), measured alongside as the reference.
// Exit status: 0 correct, 1 wrong result, 2 HIP error or bad arguments.
#include "swiglu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static float bits_to_float(uint16_t b) { return bf16_to_float(b); }
static uint16_t float_to_bits(float f) { return float_to_bf16(f); }

static void fail_hip(const char* what, hipError_t e) {
    std::fprintf(stderr, "HIP error in %s: %s\n", what, hipGetErrorString(e));
    std::printf("GEMMSYNTH_RESULT {\"correct\": false, \"error\": \"%s: %s\"}\n", what, hipGetErrorString(e));
    std::exit(2);
}
#define CHECK(call)                                 \
    do {                                            \
        hipError_t e_ = (call);                     \
        if (e_ != hipSuccess) fail_hip(#call, e_);  \
    } while (0)

struct Check {
    double max_abs = 0, max_rel = 0;
    long long mismatches = 0, checked = 0, first_bad = -1;
    float first_got = 0, first_ref = 0;
};

// Fills gate_up with bf16 values in [-4, 4) from a fixed 64-bit LCG.
static void fill(std::vector<uint16_t>& v, uint64_t seed) {
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (auto& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float u = (float)((s >> 40) & 0xffffff) / 16777216.0f;
        x = float_to_bits(8.0f * u - 4.0f);
    }
}

static Check run_and_check(int rows, int cols, uint64_t seed, uint16_t** d_in_out, uint16_t** d_out_out) {
    size_t n_in = (size_t)rows * 2 * cols, n_out = (size_t)rows * cols;
    std::vector<uint16_t> in(n_in), out(n_out, 0xffff);
    fill(in, seed);
    uint16_t *d_in, *d_out;
    CHECK(hipMalloc(&d_in, n_in * 2));
    CHECK(hipMalloc(&d_out, n_out * 2));
    CHECK(hipMemcpy(d_in, in.data(), n_in * 2, hipMemcpyHostToDevice));
    CHECK(hipMemset(d_out, 0xff, n_out * 2));  // NaN pattern: elements never written fail the check
    CHECK(swiglu_launch(d_in, d_out, rows, cols, 0));
    CHECK(hipDeviceSynchronize());
    CHECK(hipMemcpy(out.data(), d_out, n_out * 2, hipMemcpyDeviceToHost));
    Check c;
    for (long long r = 0; r < rows; ++r) {
        const uint16_t* row = in.data() + r * 2 * cols;
        for (long long j = 0; j < cols; ++j) {
            float x = bits_to_float(row[j]), y = bits_to_float(row[cols + j]);
            float ref = x / (1.0f + std::exp(-x)) * y;
            float got = bits_to_float(out[r * cols + j]);
            double err = std::fabs((double)got - (double)ref);
            if (!(err <= 0x1p-7 * std::fabs(ref) + 1e-5)) {  // also catches NaN
                if (c.first_bad < 0) {
                    c.first_bad = r * cols + j;
                    c.first_got = got;
                    c.first_ref = ref;
                }
                ++c.mismatches;
            }
            if (std::isnan(err)) err = INFINITY;
            c.max_abs = std::max(c.max_abs, err);
            if (ref != 0) c.max_rel = std::max(c.max_rel, err / std::fabs(ref));
            ++c.checked;
        }
    }
    if (d_in_out) {
        *d_in_out = d_in;
        *d_out_out = d_out;
    } else {
        CHECK(hipFree(d_in));
        CHECK(hipFree(d_out));
    }
    return c;
}

static std::string num(double x) {  // JSON has no inf/nan
    if (!std::isfinite(x)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", x);
    return b;
}

int main(int argc, char** argv) {
    int rows = argc > 1 ? std::atoi(argv[1]) : 8192;
    int cols = argc > 2 ? std::atoi(argv[2]) : 12800;
    int reps = argc > 3 ? std::atoi(argv[3]) : 200;
    if (rows <= 0 || cols <= 0 || reps <= 0) {
        std::fprintf(stderr, "usage: %s [rows>0] [cols>0] [reps>0]\n", argv[0]);
        return 2;
    }
    hipDeviceProp_t prop;
    CHECK(hipGetDeviceProperties(&prop, 0));

    Check small = run_and_check(3, 1003, 7, nullptr, nullptr);
    uint16_t *d_in, *d_out;
    Check big = run_and_check(rows, cols, 11, &d_in, &d_out);
    Check all = big;
    all.checked += small.checked;
    all.mismatches += small.mismatches;
    all.max_abs = std::max(big.max_abs, small.max_abs);
    all.max_rel = std::max(big.max_rel, small.max_rel);
    const Check& bad = small.mismatches ? small : big;
    bool correct = all.mismatches == 0;
    std::string common = "\"max_abs_err\": " + num(all.max_abs) + ", \"max_rel_err\": " + num(all.max_rel) +
                         ", \"mismatches\": " + std::to_string(all.mismatches) + ", \"checked\": " +
                         std::to_string(all.checked) + ", \"rows\": " + std::to_string(rows) +
                         ", \"cols\": " + std::to_string(cols);
    if (!correct) {
        std::fprintf(stderr, "first mismatch (%s shape): element %lld got %g expected %g\n",
                     small.mismatches ? "3x1003" : "timed", bad.first_bad, bad.first_got, bad.first_ref);
        std::printf("GEMMSYNTH_RESULT {\"correct\": false, %s, \"first_bad_index\": %lld, \"first_bad_got\": %s, "
                    "\"first_bad_expected\": %s, \"bad_shape\": \"%s\"}\n",
                    common.c_str(), bad.first_bad, num(bad.first_got).c_str(), num(bad.first_ref).c_str(),
                    small.mismatches ? "3x1003" : "timed");
        return 1;
    }

    const int warmup = 20;
    for (int i = 0; i < warmup; ++i) CHECK(swiglu_launch(d_in, d_out, rows, cols, 0));
    std::vector<hipEvent_t> ev(2 * reps);
    for (auto& e : ev) CHECK(hipEventCreate(&e));
    for (int i = 0; i < reps; ++i) {
        CHECK(hipEventRecord(ev[2 * i], 0));
        CHECK(swiglu_launch(d_in, d_out, rows, cols, 0));
        CHECK(hipEventRecord(ev[2 * i + 1], 0));
    }
    CHECK(hipDeviceSynchronize());
    std::vector<double> us(reps);
    for (int i = 0; i < reps; ++i) {
        float ms;
        CHECK(hipEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
        us[i] = ms * 1000.0;
    }
    std::sort(us.begin(), us.end());
    double median = us[reps / 2], mean = 0;
    for (double u : us) mean += u;
    mean /= reps;
    double bytes = 3.0 * rows * (double)cols * 2.0;  // read gate_up (2 per output), write out

    // Reference: a device-to-device copy of the gate_up tensor with the same events (median of 50),
    // counted as bytes read + bytes written, measured in the same process as the kernel.
    double copy_bytes = 2.0 * rows * 2.0 * (double)cols * 2.0;
    std::vector<double> copy_us(50);
    {
        uint16_t* d_copy;
        CHECK(hipMalloc(&d_copy, (size_t)rows * 2 * cols * 2));
        for (size_t i = 0; i < copy_us.size(); ++i) {
            CHECK(hipEventRecord(ev[0], 0));
            CHECK(hipMemcpyAsync(d_copy, d_in, (size_t)rows * 2 * cols * 2, hipMemcpyDeviceToDevice, 0));
            CHECK(hipEventRecord(ev[1], 0));
            CHECK(hipEventSynchronize(ev[1]));
            float ms;
            CHECK(hipEventElapsedTime(&ms, ev[0], ev[1]));
            copy_us[i] = ms * 1000.0;
        }
        CHECK(hipFree(d_copy));
        std::sort(copy_us.begin(), copy_us.end());
    }
    double copy_gbps = copy_bytes / copy_us[copy_us.size() / 2] / 1e3;
    std::printf("GEMMSYNTH_RESULT {\"correct\": true, %s, \"latency_us\": %s, \"latency_us_min\": %s, "
                "\"latency_us_mean\": %s, \"latency_us_p90\": %s, \"reps\": %d, \"bytes\": %.0f, \"gbps\": %s, "
                "\"copy_gbps\": %s, \"device\": \"%s\"}\n",
                common.c_str(), num(median).c_str(), num(us[0]).c_str(), num(mean).c_str(),
                num(us[(reps * 9) / 10]).c_str(), reps, bytes, num(bytes / median / 1e3).c_str(),
                num(copy_gbps).c_str(), prop.name);
    for (auto& e : ev) CHECK(hipEventDestroy(e));
    CHECK(hipFree(d_in));
    CHECK(hipFree(d_out));
    return 0;
}
