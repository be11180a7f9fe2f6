//! Dispatch cost of the patched AITER untuned path (`cargo bench --bench aiter_dispatch`).
//!
//! The heuristic header of `generated/aiter/gemm_a8w8_blockscale_heuristic.patch` is compiled with g++ -O2
//! (`CXX` names another compiler, e.g. `CXX=clang++-15`: AITER builds the file with hipcc, a clang) and
//! timed on 1,000,000 random shapes per repeat (half log-uniform M with N, K multiples of 128, half
//! uniform in 1..=65536), and on the same number of calls cycling through the first 512 of them:
//! - the loop alone (reads the shapes and sums them, no dispatch), the floor every figure includes;
//! - `a8w8_blockscale_heuristic_dispatch` as the patched `blockscale_dispatch` calls it (switch check,
//!   then the dispatcher);
//! - each form of the rule on its own: `select` (the exact tree on the IR's i64 semantics), `fast::select`
//!   (the tree of the rule simplified for real shapes, `rule::lower`, in unsigned arithmetic: what the
//!   dispatcher calls for every dimension below 2^bits) and the branchless form of each
//!   (`render::cpp::render_branchless[_simplified]`: every comparison evaluated, mask arithmetic, a table
//!   lookup).
//!
//! Then every chain of the committed rule (the rule and each nested chain, as a rule of its own, rendered
//! by the same renderers) is timed in each form next to its number of distinct comparisons, which says
//! at what rule size, if any, the branchless form pays.
//!
//! Next to it, the per-call cost of AITER's Python-side lookup in the style of `get_CKGEMM_config`
//! (functools.lru_cache over a (gfx, cu_num, M, N, K) dict; `benches/aiter_dispatch_lookup.py`), for
//! cache hits and for random shapes. The variants of one repeat run back to back, so a noisy machine
//! slows them alike; each figure is the median (and the minimum) over the repeats of one run.
//!
//! `DISPATCH_BENCH_DIR=DIR` also writes the generated sources and a `run.sh` into DIR, so the same code
//! can be timed on another machine without cargo (`bash DIR/run.sh`).

use std::path::Path;
use std::process::Command;

use synth_core::aiter::patch::{parse_patch, PATCH_FILE};
use synth_core::catalog::Catalog;
use synth_core::render::{cpp, Provenance};
use synth_core::rule::{Node, Rule};

const SHAPES: usize = 1_000_000;
const CPP_REPEATS: usize = 21;
const PY_REPEATS: usize = 5;

const BENCH_PRELUDE: &str = r#"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "instances_stub.h"
#include "gemm_a8w8_blockscale_heuristic.h"
#include "gemm_a8w8_blockscale_heuristic_branchless.h"
#include "gemm_a8w8_blockscale_heuristic_branchless_simplified.h"
"#;

const BENCH_MAIN: &str = r#"
namespace {

struct Shapes
{
    std::vector<int> M, N, K;
};

// Times one pass of f over the shapes; the sum of the choices stays in a register (no memory round trip
// per call) and is returned so the calls cannot be dropped.
template <typename F>
__attribute__((noinline)) double pass(const Shapes& s, F f, uintptr_t& sink)
{
    const size_t n = s.M.size();
    uintptr_t acc = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for(size_t i = 0; i < n; ++i)
        acc += f(s.M[i], s.N[i], s.K[i]);
    const auto t1 = std::chrono::steady_clock::now();
    sink += acc;
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

template <typename C>
uintptr_t fold(const C& c)
{
    return reinterpret_cast<uintptr_t>(c.kernel) + static_cast<uintptr_t>(c.splitK);
}

} // namespace

int main(int argc, char** argv)
{
    if(argc != 3)
        return 2;
    const size_t n = std::strtoull(argv[1], nullptr, 10);
    const int repeats = std::atoi(argv[2]);
    std::mt19937_64 rng(1);
    Shapes random{std::vector<int>(n), std::vector<int>(n), std::vector<int>(n)};
    for(size_t i = 0; i < n; ++i)
    {
        if(i % 2 == 0)
        {
            random.M[i] = std::max(1, static_cast<int>(std::pow(2.0, std::uniform_real_distribution<double>(0, 15)(rng))));
            random.N[i] = 128 * std::uniform_int_distribution<int>(1, 256)(rng);
            random.K[i] = 128 * std::uniform_int_distribution<int>(1, 256)(rng);
        }
        else
        {
            random.M[i] = std::uniform_int_distribution<int>(1, 65536)(rng);
            random.N[i] = std::uniform_int_distribution<int>(1, 65536)(rng);
            random.K[i] = std::uniform_int_distribution<int>(1, 65536)(rng);
        }
    }
    // The same shapes, cycling through the first 512 (as the Python hit case does).
    Shapes cycled{std::vector<int>(n), std::vector<int>(n), std::vector<int>(n)};
    for(size_t i = 0; i < n; ++i)
    {
        cycled.M[i] = random.M[i % 512];
        cycled.N[i] = random.N[i % 512];
        cycled.K[i] = random.K[i % 512];
    }
    uintptr_t sink = 0;
    std::vector<std::vector<double>> t(2 * VARIANTS);
    std::vector<std::string> labels(2 * VARIANTS);
    for(int r = 0; r < repeats; ++r)
    {
        int v = 0;
        auto run = [&](const char* label, auto f) {
            labels[2 * v] = std::string(label) + " random";
            labels[2 * v + 1] = std::string(label) + " cycled";
            t[2 * v].push_back(pass(random, f, sink));
            t[2 * v + 1].push_back(pass(cycled, f, sink));
            ++v;
        };
        RUN_VARIANTS
    }
    // One line per variant and shape set: median and minimum ns/call over the repeats, then the label.
    for(size_t i = 0; i < t.size(); ++i)
    {
        auto& x = t[i];
        std::sort(x.begin(), x.end());
        std::printf("%.2f %.2f %s\n", x[x.size() / 2], x.front(), labels[i].c_str());
    }
    std::fprintf(stderr, "%zu\n", static_cast<size_t>(sink % 7));
    return 0;
}
"#;

/// Every chain of `node` (itself first, then nested ones in source order), as rules of their own.
fn chains(node: &Node, out: &mut Vec<Rule>) {
    if let Node::Chain { branches, otherwise } = node {
        if !branches.is_empty() {
            out.push(Rule::new(node.clone()));
        }
        for (_, body) in branches {
            chains(body, out);
        }
        chains(otherwise, out);
    }
}

/// Copies the generated bench sources of `dir`, the Python lookup and a `run.sh` into `keep`, to time the
/// same code on another machine (`bash KEEP/run.sh`: prints the C++ rows, each `median min label`, then
/// the Python rows).
fn export(dir: &Path, keep: &Path, lookup: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(keep)?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "h" || e == "cpp") {
            std::fs::copy(&path, keep.join(path.file_name().expect("a file name")))?;
        }
    }
    std::fs::copy(lookup, keep.join("aiter_dispatch_lookup.py"))?;
    let run = format!(
        "#!/bin/sh\n# The aiter_dispatch bench as `cargo bench --bench aiter_dispatch` runs it, without cargo.\nset -e\n\
         cd \"$(dirname \"$0\")\"\n\"${{CXX:-g++}}\" -std=c++17 -O2 bench.cpp -o bench\n./bench {SHAPES} {CPP_REPEATS}\n\
         python3 aiter_dispatch_lookup.py {SHAPES} {PY_REPEATS}\n"
    );
    std::fs::write(keep.join("run.sh"), run)?;
    println!("bench sources written to {} (run them elsewhere with `bash run.sh`)", keep.display());
    Ok(())
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes --bench; no other arguments are taken.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let catalog = Catalog::embedded();
    let patch = std::fs::read_to_string(root.join("generated/aiter").join(PATCH_FILE))?;
    let files = parse_patch(&patch)?;
    let header = files.iter().find(|f| f.path.ends_with("gemm_a8w8_blockscale_heuristic.h")).expect("header in patch");
    let rule = synth_core::rule::load(&root.join("generated/rule.json"), &catalog)?;
    let (branchless, comparisons) = cpp::render_branchless(&rule, &catalog)?;
    let Some((simplified, simplified_comparisons, _)) = cpp::render_branchless_simplified(&rule, &catalog)? else {
        anyhow::bail!("the committed rule has no simplified form (rule::lower); this bench times it");
    };
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());

    let dir = tempfile::tempdir()?;
    let d = dir.path();
    std::fs::write(d.join("gemm_a8w8_blockscale_heuristic.h"), header.hunks[0].new_text())?;
    std::fs::write(d.join(cpp::BRANCHLESS_HEADER), branchless)?;
    std::fs::write(d.join(cpp::BRANCHLESS_SIMPLIFIED_HEADER), simplified)?;
    std::fs::write(d.join(cpp::CHECK_STUB), cpp::render_check_stub(&catalog)?)?;

    let mut src = String::from(BENCH_PRELUDE);
    let mut runs = rule_runs();
    let mut sub = Vec::new();
    chains(&rule.root, &mut sub);
    let sub_info = write_chains(d, &sub, &catalog, &mut src, &mut runs)?;
    src.push_str(&format!("#define VARIANTS {}\n", runs.len()));
    src.push_str(&BENCH_MAIN.replace("RUN_VARIANTS", &runs.join("\n        ")));
    std::fs::write(d.join("bench.cpp"), src)?;
    if let Some(keep) = std::env::var_os("DISPATCH_BENCH_DIR") {
        export(d, Path::new(&keep), &root.join("benches/aiter_dispatch_lookup.py"))?;
    }
    let rows = time_cpp(&cxx, d, runs.len())?;
    let cell = |v: usize| {
        let (r, c) = (&rows[2 * v], &rows[2 * v + 1]);
        format!("random {:>6} ({:>5}), cycled {:>6} ({:>5})", r.0, r.1, c.0, c.1)
    };

    println!(
        "aiter dispatch ({cxx} -O2): {SHAPES} calls per pass, random shapes or the first 512 of them cycled; \
         median (min) ns/call over {CPP_REPEATS} repeats"
    );
    println!("  loop alone (reads the shapes, no dispatch):          {}", cell(0));
    println!("  switch + a8w8_blockscale_heuristic_dispatch:         {}   target <= 5 ns", cell(1));
    println!("  select (the exact tree, for dimensions beyond 2^bits): {}", cell(2));
    println!("  select_branchless ({comparisons:>2} comparisons, all evaluated):  {}", cell(3));
    println!("  fast::select (simplified; the dispatcher's tree):     {}", cell(4));
    println!("  fast::select_branchless ({simplified_comparisons:>2} comparisons):           {}", cell(5));
    print_chains(&rows, &sub_info);
    time_python(root)
}

/// The C++ variants of the whole rule: the loop alone, the dispatcher, and each form of the rule.
fn rule_runs() -> Vec<String> {
    let ns = cpp::DETAIL_NAMESPACE;
    vec![
        "run(\"loop\", [](int m, int n, int k) { return static_cast<uintptr_t>(m + n + k); });".to_string(),
        "run(\"dispatcher\", [](int m, int n, int k) -> uintptr_t { return a8w8_blockscale_heuristic_enabled() ? \
         fold(a8w8_blockscale_heuristic_dispatch<float, bf16stub>(m, n, k)) : 0; });"
            .to_string(),
        format!("run(\"tree\", [](int m, int n, int k) {{ return fold({ns}::select<float, bf16stub>(m, n, k)); }});"),
        format!("run(\"branchless\", [](int m, int n, int k) {{ return fold({ns}::select_branchless<float, bf16stub>(m, n, k)); }});"),
        format!("run(\"simplified\", [](int m, int n, int k) {{ return fold({ns}::fast::select<float, bf16stub>(static_cast<uint32_t>(m), static_cast<uint32_t>(n), static_cast<uint32_t>(k))); }});"),
        format!("run(\"simplified branchless\", [](int m, int n, int k) {{ return fold({ns}::fast::select_branchless<float, bf16stub>(static_cast<uint32_t>(m), static_cast<uint32_t>(n), static_cast<uint32_t>(k))); }});"),
    ]
}

/// Writes each chain of the rule in every form into `d`, includes them in `src` and adds their variants to
/// `runs`. Returns each chain's (comparisons, leaves, depth).
fn write_chains(
    d: &Path,
    sub: &[Rule],
    catalog: &Catalog,
    src: &mut String,
    runs: &mut Vec<String>,
) -> anyhow::Result<Vec<(usize, usize, usize)>> {
    let ns = cpp::DETAIL_NAMESPACE;
    let provenance = Provenance {
        dataset: "a chain of generated/rule.json".into(),
        training: "none".into(),
        figures: vec!["timed by cargo bench --bench aiter_dispatch".into()],
        command: "cargo bench --bench aiter_dispatch".into(),
    };
    let mut sub_info = Vec::new();
    for (i, r) in sub.iter().enumerate() {
        let (fragment, cmps) = cpp::render_branchless(r, catalog)?;
        let Some((fast_fragment, _, _)) = cpp::render_branchless_simplified(r, catalog)? else {
            anyhow::bail!("chain {i} of the committed rule has no simplified form");
        };
        // A first line of its own keeps two equal chains (or chain 0 and the rule) from being taken for
        // one file by `#pragma once`, which compilers may decide by content.
        let own = format!("// chain {i} of the committed rule\n");
        std::fs::write(d.join(format!("chain_{i}.h")), own.clone() + &cpp::render_cpp(r, catalog, &provenance)?)?;
        std::fs::write(d.join(format!("chain_{i}_branchless.h")), own.clone() + &fragment)?;
        std::fs::write(d.join(format!("chain_{i}_branchless_simplified.h")), own + &fast_fragment)?;
        src.push_str(&format!(
            "namespace chain_{i} {{\n#include \"chain_{i}.h\"\n#include \"chain_{i}_branchless.h\"\n\
             #include \"chain_{i}_branchless_simplified.h\"\n}}\n"
        ));
        for f in ["select", "select_branchless", "fast::select", "fast::select_branchless"] {
            let args = if f.starts_with("fast") {
                "static_cast<uint32_t>(m), static_cast<uint32_t>(n), static_cast<uint32_t>(k)"
            } else {
                "m, n, k"
            };
            runs.push(format!(
                "run(\"chain_{i} {f}\", [](int m, int n, int k) {{ return fold(chain_{i}::{ns}::{f}<float, bf16stub>({args})); }});"
            ));
        }
        sub_info.push((cmps, r.leaves().len(), r.depth()));
    }
    Ok(sub_info)
}

/// Compiles `bench.cpp` in `d` with `cxx` and runs it: two rows (random, cycled) of `median min` per
/// variant.
fn time_cpp(cxx: &str, d: &Path, variants: usize) -> anyhow::Result<Vec<(String, String)>> {
    let out = Command::new(cxx)
        .args(["-std=c++17", "-O2", "bench.cpp", "-o", "bench"])
        .current_dir(d)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run the C++ compiler `{cxx}` (set CXX to one that exists): {e}"))?;
    anyhow::ensure!(out.status.success(), "{cxx} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(d.join("bench")).args([SHAPES.to_string(), CPP_REPEATS.to_string()]).output()?;
    anyhow::ensure!(out.status.success(), "the C++ bench failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout)?;
    let rows: Vec<(String, String)> = text
        .lines()
        .map(|l| {
            let mut it = l.split(' ');
            (it.next().unwrap_or("?").to_string(), it.next().unwrap_or("?").to_string())
        })
        .collect();
    anyhow::ensure!(rows.len() == 2 * variants, "the C++ bench printed {} rows, not {}", rows.len(), 2 * variants);
    Ok(rows)
}

/// Prints the medians of each chain's four forms (the variants after the rule's six).
fn print_chains(rows: &[(String, String)], sub_info: &[(usize, usize, usize)]) {
    println!("  each chain of the committed rule as a rule of its own (medians, ns/call; tree, branchless, simplified");
    println!("  tree, simplified branchless):");
    println!("    chain  comparisons  leaves  depth       random: tree  brl  s.tree  s.brl   cycled: tree  brl  s.tree  s.brl");
    for (i, (cmps, leaves, depth)) in sub_info.iter().enumerate() {
        let v = |f: usize, cycled: usize| rows[2 * (6 + 4 * i + f) + cycled].0.clone();
        println!(
            "    {i:>5}  {cmps:>11}  {leaves:>6}  {depth:>5}  {:>17} {:>5} {:>7} {:>6}  {:>13} {:>5} {:>7} {:>6}",
            v(0, 0),
            v(1, 0),
            v(2, 0),
            v(3, 0),
            v(0, 1),
            v(1, 1),
            v(2, 1),
            v(3, 1)
        );
    }
}

/// Times the Python lookup (`benches/aiter_dispatch_lookup.py`) and prints its rows.
fn time_python(root: &Path) -> anyhow::Result<()> {
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
