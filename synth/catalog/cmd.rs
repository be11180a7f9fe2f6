//! (in progress)
#[derive(Debug, clap::Args)]
pub struct InstancesArgs {}
pub fn run(_args: InstancesArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
