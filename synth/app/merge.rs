//! `synth merge`: journals of one device (the shards of `synth bench --shard I/N`, measured on several
//! machines) into one journal; the checks and the all-or-nothing write are [`synth_measure::measure::merge`]'s.

use std::path::PathBuf;

use anyhow::Result;

use synth_core::catalog::Catalog;
use synth_measure::measure::merge::merge_journals;

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Journals to merge (written by `synth bench`, one device and software stack).
    #[arg(required = true, value_name = "JOURNAL")]
    pub journals: Vec<PathBuf>,
    /// The merged journal. When it exists it must be one of the journals named (merging into it).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: MergeArgs) -> Result<()> {
    let report = merge_journals(&args.journals, &args.out, &Catalog::embedded())?;
    for (path, rows) in &report.inputs {
        outln!("{}: {rows} rows", synth_base::sanitize::shown_path(path));
    }
    let dup = if report.duplicates > 0 {
        format!(" ({} cells held byte for byte the same by two journals written once)", report.duplicates)
    } else {
        String::new()
    };
    outln!(
        "merged {} journals into {}: {} rows{dup}",
        report.inputs.len(),
        synth_base::sanitize::shown_path(&args.out),
        report.rows
    );
    Ok(())
}
