//! (in progress)
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}
pub fn run(_args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
