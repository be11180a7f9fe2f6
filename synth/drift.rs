//! (in progress)
#[derive(Debug, clap::Args)]
pub struct DriftArgs {}
pub fn run(_args: DriftArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
