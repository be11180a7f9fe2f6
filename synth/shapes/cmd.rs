//! (in progress)
#[derive(Debug, clap::Args)]
pub struct ShapesArgs {}
pub fn run(_args: ShapesArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
