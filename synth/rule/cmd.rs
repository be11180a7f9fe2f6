//! (in progress)
#[derive(Debug, clap::Args)]
pub struct CheckArgs {}
pub fn run(_args: CheckArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
