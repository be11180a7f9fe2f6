//! Dispatch cost of the patched AITER untuned path (`cargo bench --bench aiter_dispatch`): the heuristic
//! header of `generated/aiter/gemm_a8w8_blockscale_heuristic.patch`, compiled with g++ -O2, called as the
//! patched `blockscale_dispatch` calls it (switch check, then `a8w8_blockscale_heuristic_dispatch`) on
//! 1,000,000 random shapes; next to it, the per-call cost of AITER's Python-side lookup in the style of
//! `get_CKGEMM_config` (functools.lru_cache over a (gfx, cu_num, M, N, K) dict;
//! `benches/aiter_dispatch_lookup.py`), for cache hits and for random shapes. Prints the median ns/call
//! of the repeats of one run.

use std::path::Path;
use std::process::Command;

use gemm_synth::aiter::patch::{parse_patch, PATCH_FILE};
use gemm_synth::catalog::Catalog;
use gemm_synth::render::cpp;

const SHAPES: usize = 1_000_000;
const CPP_REPEATS: usize = 21;
const PY_REPEATS: usize = 5;

const BENCH_CPP: &str = r#"
#include "instances_stub.h"
#include "gemm_a8w8_blockscale_heuristic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char** argv)
{
    const size_t n = std::strtoull(argv[1], nullptr, 10);
    const int repeats = std::atoi(argv[2]);
    std::mt19937_64 rng(1);
    std::vector<int> M(n), N(n), K(n);
    for(size_t i = 0; i < n; ++i)
    {
        if(i % 2 == 0)
        {
            M[i] = std::max(1, static_cast<int>(std::pow(2.0, std::uniform_real_distribution<double>(0, 15)(rng))));
            N[i] = 128 * std::uniform_int_distribution<int>(1, 256)(rng);
            K[i] = 128 * std::uniform_int_distribution<int>(1, 256)(rng);
        }
        else
        {
            M[i] = std::uniform_int_distribution<int>(1, 65536)(rng);
            N[i] = std::uniform_int_distribution<int>(1, 65536)(rng);
            K[i] = std::uniform_int_distribution<int>(1, 65536)(rng);
        }
    }
    uintptr_t sink = 0;
    auto time = [&](const std::vector<int>& M, const std::vector<int>& N, const std::vector<int>& K) {
        std::vector<double> ns;
        for(int r = 0; r < repeats; ++r)
        {
            const auto t0 = std::chrono::steady_clock::now();
            for(size_t i = 0; i < n; ++i)
            {
                if(a8w8_blockscale_heuristic_enabled())
                {
                    const BlockscaleChoice c = a8w8_blockscale_heuristic_dispatch<float, bf16stub>(M[i], N[i], K[i]);
                    sink += reinterpret_cast<uintptr_t>(c.kernel) + static_cast<uintptr_t>(c.splitK);
                }
            }
            const auto t1 = std::chrono::steady_clock::now();
            ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n));
        }
        std::sort(ns.begin(), ns.end());
        std::printf("%.2f %.2f %.2f ", ns[ns.size() / 2], ns.front(), ns.back());
    };
    time(M, N, K);
    // The same shapes, cycling through the first 512 (as the Python hit case does).
    std::vector<int> PM(n), PN(n), PK(n);
    for(size_t i = 0; i < n; ++i)
    {
        PM[i] = M[i % 512];
        PN[i] = N[i % 512];
        PK[i] = K[i % 512];
    }
    time(PM, PN, PK);
    std::printf("%zu\n", static_cast<size_t>(sink % 7));
    return 0;
}
"#;

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes --bench; no other arguments are taken.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let patch = std::fs::read_to_string(root.join("generated/aiter").join(PATCH_FILE))?;
    let files = parse_patch(&patch)?;
    let header = files.iter().find(|f| f.path.ends_with("gemm_a8w8_blockscale_heuristic.h")).expect("header in patch");
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    std::fs::write(d.join("gemm_a8w8_blockscale_heuristic.h"), header.hunks[0].new_text())?;
    std::fs::write(d.join(cpp::CHECK_STUB), cpp::render_check_stub(&Catalog::embedded())?)?;
    std::fs::write(d.join("bench.cpp"), BENCH_CPP)?;
    let out = Command::new("g++").args(["-std=c++17", "-O2", "bench.cpp", "-o", "bench"]).current_dir(d).output()?;
    anyhow::ensure!(out.status.success(), "g++ failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(d.join("bench")).args([SHAPES.to_string(), CPP_REPEATS.to_string()]).output()?;
    anyhow::ensure!(out.status.success(), "the C++ bench failed");
    let text = String::from_utf8(out.stdout)?;
    let v: Vec<&str> = text.split_whitespace().collect();
    println!("aiter dispatch, {SHAPES} random shapes per repeat");
    println!(
        "  generated C++ dispatcher (g++ -O2, switch + a8w8_blockscale_heuristic_dispatch), random shapes: median {} \
         ns/call over {CPP_REPEATS} repeats (min {}, max {}); target <= 5 ns",
        v[0], v[1], v[2]
    );
    println!(
        "  generated C++ dispatcher, 512 distinct shapes cycled: median {} ns/call over {CPP_REPEATS} repeats (min {}, max {})",
        v[3], v[4], v[5]
    );
    let py = Command::new("python3")
        .arg(root.join("benches/aiter_dispatch_lookup.py"))
        .args([SHAPES.to_string(), PY_REPEATS.to_string()])
        .output()?;
    anyhow::ensure!(py.status.success(), "python3 failed:\n{}", String::from_utf8_lossy(&py.stderr));
    for line in String::from_utf8(py.stdout)?.lines() {
        let (kind, ns) = line.split_once(' ').unwrap_or((line, "?"));
        let what = if kind == "hit" {
            "lru_cache hits (512 distinct shapes)"
        } else {
            "random shapes (lru_cache misses: 3 dict lookups + padding + log formatting)"
        };
        println!("  Python get_CKGEMM_config-style lookup, {what}: median {ns} ns/call over {PY_REPEATS} repeats");
    }
    Ok(())
}
