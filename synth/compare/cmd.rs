//! (in progress)
#[derive(Debug, clap::Args)]
pub struct CompareArgs {}
pub fn run(_args: CompareArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
