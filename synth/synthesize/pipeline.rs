//! (in progress)
#[derive(Debug, clap::Args)]
pub struct RunArgs {}
pub fn run(_args: RunArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
