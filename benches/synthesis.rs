//! Synthesis time: a depth-4 tree over every shape of the dataset, and the default 8-leaf rule over the
//! 40-shape training sample. Uses the H200 dataset of the crate; while it is absent, the MI300X tuned
//! table (sparse: one measured kernel per shape) restricted to Qwen3-32B TP=2.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use gemm_synth::app::session::{load_matrix, model_layers, shapes_of_layers, training_sample, DEFAULT_DATASET};
use synth_core::catalog::Catalog;
use synth_core::synthesize::{try_synthesize, Limits};

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let catalog = Catalog::embedded();
    let h200 = root.join(DEFAULT_DATASET);
    let path =
        if h200.exists() { h200 } else { root.join("measurements/mi300x/a8w8_blockscale_tuned_gemm_qwen3_vl_32b.csv") };
    let matrix = load_matrix(&path, &catalog).expect("dataset loads");
    let (_, layers) = model_layers("qwen3-32b", None, 2).expect("built-in model");
    let shapes = shapes_of_layers(&matrix, &layers, "qwen3-32b TP=2").expect("dataset has the layers");
    let (train, _, _) = training_sample(&matrix, &shapes, 10, 0);
    let name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();

    let mut g = c.benchmark_group("synthesis");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let depth4 = Limits { max_depth: 4, max_leaves: 16, ..Limits::default() };
    g.bench_function(format!("depth4_{}shapes_{name}", shapes.len()), |b| {
        b.iter(|| try_synthesize(&matrix, &catalog, &shapes, None, &depth4).expect("synthesis runs"))
    });
    let default = Limits::default();
    g.bench_function(format!("leaves8_{}shapes_{name}", train.len()), |b| {
        b.iter(|| try_synthesize(&matrix, &catalog, &train, None, &default).expect("synthesis runs"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
