//! (in progress)
#[derive(Debug, clap::Args)]
pub struct SearchArgs {}
pub fn run(_args: SearchArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
