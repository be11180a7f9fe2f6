//! (in progress)
#[derive(Debug, clap::Args)]
pub struct RewriteArgs {}
pub fn run(_args: RewriteArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
