//! `synth shapes`: print a model's layers at a TP and the (M, N, K) list for an M set.

use synth_base::textable::{left, right, TextTable};

use crate::app::model_args::ModelArgs;
use synth_core::shapes::{m_aiter_grid, m_dataset_grid, m_decode, m_log_uniform, m_pow2, sample_m, Layer, ModelSpec};

/// The model `synth shapes` lists when none is named.
pub const DEFAULT_MODEL: &str = "qwen3-32b";

/// Which M values to pair with the layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MSet {
    /// {1, 2, 4, 8}.
    Decode,
    /// AITER's fine tuning grid (16-step to 256, 32 to 1024, 64 to 4096, 128 beyond) up to --max-m.
    Aiter,
    /// Powers of two up to --max-m.
    Pow2,
    /// --count values drawn log-uniformly from 1..=--max-m with --seed.
    LogUniform,
    /// The training sample: --count (10) values stratified over the dataset grid × the 4 layers.
    Forty,
    /// The 80-value measurement grid, cut at --max-m.
    Dataset,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShapesFormat {
    Table,
    Csv,
}

#[derive(Debug, clap::Args)]
pub struct ShapesArgs {
    // The model [default: --model qwen3-32b].
    #[command(flatten)]
    pub model: ModelArgs,
    /// Tensor-parallel degree.
    #[arg(long, default_value_t = 2)]
    pub tp: u32,
    /// M set.
    #[arg(long, value_enum, default_value = "dataset")]
    pub m_set: MSet,
    /// Largest M for aiter, pow2, log-uniform, forty and dataset (at most 1048576: the aiter grid is then
    /// about 8,300 values).
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub max_m: u32,
    /// Seed for log-uniform and forty.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Number of M values for log-uniform and forty.
    #[arg(long, default_value_t = 10)]
    pub count: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ShapesFormat,
}

/// The M values an argument set asks for.
pub fn m_values(set: MSet, max_m: u32, count: usize, seed: u64) -> Vec<u32> {
    let upto = |v: Vec<u32>| v.into_iter().filter(|&m| m <= max_m).collect::<Vec<_>>();
    match set {
        MSet::Decode => m_decode(),
        MSet::Aiter => m_aiter_grid(max_m),
        MSet::Pow2 => m_pow2(max_m),
        MSet::LogUniform => m_log_uniform(count, 1, max_m, seed),
        MSet::Forty => sample_m(&upto(m_dataset_grid()), count, seed),
        MSet::Dataset => upto(m_dataset_grid()),
    }
}

fn render_table(spec: &ModelSpec, tp: u32, layers: &[Layer], ms: &[u32]) -> String {
    // The name comes from a user's spec file: a newline or a bidi override must not reach the terminal.
    let mut out =
        format!("model {} at TP {tp} ({} decoder layers)\n", synth_base::sanitize::shown(&spec.name), spec.num_layers);
    // Notes only for what a dense grouped-query spec does not have, so its output keeps its bytes.
    if let Some(moe) = &spec.moe {
        out.push_str(&format!(
            "experts: {} routed ({} per token){}, {} leading decoder layers dense; an expert GEMM's M is the \
             number of tokens routed to that expert\n",
            moe.experts,
            moe.experts_per_token,
            if moe.shared_experts > 0 { format!(", {} shared", moe.shared_experts) } else { String::new() },
            moe.dense_layers
        ));
    }
    let replicated = spec.replicated_layers();
    if !replicated.is_empty() {
        out.push_str(&format!(
            "replicated on every TP rank (N and K do not depend on TP): {}\n",
            replicated.join(", ")
        ));
    }
    out.push('\n');
    let mut t = TextTable::new(vec![left("layer").min(14), right("N").min(8), right("K").min(8)]).gap(0);
    for l in layers {
        // A space before every number keeps columns apart whatever the widths (gap 0 keeps the usual layout).
        t.row([l.name.to_string(), format!(" {}", l.n), format!(" {}", l.k)]);
    }
    out.push_str(&t.render());
    out.push_str(&format!("\n{} M values x {} layers = {} shapes\n", ms.len(), layers.len(), ms.len() * layers.len()));
    let mut t =
        TextTable::new(vec![left("layer").min(14), right("M").min(8), right("N").min(8), right("K").min(8)]).gap(0);
    for l in layers {
        for &m in ms {
            t.row([l.name.to_string(), format!(" {m}"), format!(" {}", l.n), format!(" {}", l.k)]);
        }
    }
    out.push_str(&t.render());
    out
}

fn render_csv(layers: &[Layer], ms: &[u32]) -> anyhow::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["layer", "M", "N", "K"])?;
    for l in layers {
        for &m in ms {
            w.write_record([l.name.to_string(), m.to_string(), l.n.to_string(), l.k.to_string()])?;
        }
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// The most M values `--count` may ask for: a log-uniform draw keeps every value in memory, and no
/// measurement or training run uses more than a few hundred.
const MAX_COUNT: usize = 100_000;

pub fn run(args: ShapesArgs) -> anyhow::Result<()> {
    let spec = args.model.load_or(DEFAULT_MODEL)?;
    let layers = spec.layers(args.tp)?;
    let set = clap::ValueEnum::to_possible_value(&args.m_set).map_or_else(String::new, |v| v.get_name().to_string());
    let draws = matches!(args.m_set, MSet::LogUniform | MSet::Forty);
    if draws && args.count > MAX_COUNT {
        anyhow::bail!(
            "--count {} is more M values than any run measures (at most {MAX_COUNT}); pass a smaller --count",
            args.count
        );
    }
    let ms = m_values(args.m_set, args.max_m, args.count, args.seed);
    if draws && args.count > 0 && ms.len() < args.count {
        errln!(
            "note: --m-set {set} holds only {} distinct values up to --max-m {}, fewer than --count {}: all of them are listed",
            ms.len(),
            args.max_m,
            args.count
        );
    }
    if ms.is_empty() && args.count == 0 && matches!(args.m_set, MSet::LogUniform | MSet::Forty) {
        anyhow::bail!("--m-set {set} draws --count values, and --count is 0; pass --count 1 or more");
    }
    if ms.is_empty() {
        anyhow::bail!("--m-set {set} has no value up to --max-m {}; raise --max-m", args.max_m);
    }
    let text = match args.format {
        ShapesFormat::Table => render_table(&spec, args.tp, &layers, &ms),
        ShapesFormat::Csv => render_csv(&layers, &ms)?,
    };
    out!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_only_for_experts_and_replicated_layers() {
        // A dense grouped-query model: the header and the layer table as they always were.
        let dense = ModelSpec::builtin("llama-3.1-8b").unwrap();
        let text = render_table(&dense, 1, &dense.layers(1).unwrap(), &[1]);
        assert!(
            text.starts_with("model llama-3.1-8b at TP 1 (32 decoder layers)\n\nlayer                N       K\nqkv_proj          6144    4096\n"),
            "{text}"
        );
        let moe = ModelSpec::builtin("deepseek-v2-lite").unwrap();
        let text = render_table(&moe, 2, &moe.layers(2).unwrap(), &[1]);
        let head: Vec<&str> = text.lines().take(4).collect();
        assert_eq!(
            head,
            [
                "model deepseek-v2-lite at TP 2 (27 decoder layers)",
                "experts: 64 routed (6 per token), 2 shared, 1 leading decoder layers dense; an expert GEMM's M is the \
                 number of tokens routed to that expert",
                "replicated on every TP rank (N and K do not depend on TP): kv_a_proj",
                "",
            ]
        );
        assert!(text.contains("shared_experts.gate_up_proj    2816    2048"), "{text}");
    }

    #[test]
    fn csv_lists_every_layer_at_every_m_and_quotes_a_comma() {
        let layers =
            vec![Layer { name: "o_proj".into(), n: 7168, k: 2048 }, Layer { name: "odd,name".into(), n: 64, k: 128 }];
        let text = render_csv(&layers, &[1, 16]).unwrap();
        assert_eq!(
            text,
            "layer,M,N,K\no_proj,1,7168,2048\no_proj,16,7168,2048\n\"odd,name\",1,64,128\n\"odd,name\",16,64,128\n"
        );
    }

    /// A spec whose sizes have ten digits: every number of both tables stands apart from its neighbours
    /// (a hidden size of 2^32 - 1 once ran N and K together as `51204294967295`).
    #[test]
    fn ten_digit_sizes_never_run_together() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.toml");
        std::fs::write(
            &path,
            "name = 'big'\nhidden = 4294967295\nintermediate = 25600\nheads = 64\nkv_heads = 8\nhead_dim = 128\n\
             layers = 64\n",
        )
        .unwrap();
        let spec = ModelSpec::load(&path).unwrap();
        let layers = spec.layers(2).unwrap();
        let ms = m_values(MSet::Decode, 16384, 10, 0);
        let text = render_table(&spec, 2, &layers, &ms);
        assert!(text.contains("\nqkv_proj             5120 4294967295\n"), "{text}");
        assert!(text.contains("\nqkv_proj             1       5120 4294967295\n"), "{text}");
        // Each row of the layer table reads back as its layer, N and K; each row of the shape table as its
        // layer, M, N and K.
        let (head, shapes) = text.split_once(" shapes\n").unwrap();
        let wanted: Vec<String> = layers.iter().map(|l| format!("{} {} {}", l.name, l.n, l.k)).collect();
        let rows: Vec<String> = head
            .lines()
            .skip_while(|l| !l.starts_with("layer"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(rows, wanted, "{text}");
        let wanted: Vec<String> =
            layers.iter().flat_map(|l| ms.iter().map(move |m| format!("{} {m} {} {}", l.name, l.n, l.k))).collect();
        let rows: Vec<String> =
            shapes.lines().skip(1).map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(rows, wanted, "{text}");
    }

    /// The default `synth shapes` (qwen3-32b at TP 2, the dataset M set) keeps its layout byte for byte:
    /// names left in 14 columns, numbers right in 8.
    #[test]
    fn the_default_qwen3_32b_table_keeps_its_layout() {
        let spec = ModelSpec::builtin("qwen3-32b").unwrap();
        let layers = spec.layers(2).unwrap();
        let ms = m_values(MSet::Dataset, 16384, 10, 0);
        let text = render_table(&spec, 2, &layers, &ms);
        let mut want = String::from("model qwen3-32b at TP 2 (64 decoder layers)\n\n");
        want.push_str(&format!("{:<14}{:>8}{:>8}\n", "layer", "N", "K"));
        for (name, n, k) in [
            ("qkv_proj", 5120, 5120),
            ("o_proj", 5120, 4096),
            ("gate_up_proj", 25600, 5120),
            ("down_proj", 5120, 12800),
        ] {
            want.push_str(&format!("{name:<14}{n:>8}{k:>8}\n"));
        }
        want.push_str(&format!("\n{} M values x 4 layers = {} shapes\n", ms.len(), ms.len() * 4));
        want.push_str(&format!("{:<14}{:>8}{:>8}{:>8}\n", "layer", "M", "N", "K"));
        for l in &layers {
            for m in &ms {
                want.push_str(&format!("{:<14}{m:>8}{:>8}{:>8}\n", l.name, l.n, l.k));
            }
        }
        assert_eq!(ms.len(), 80);
        assert_eq!(text, want);
    }
}
