//! `synth aiter`: write the heuristic patch for a rule, apply or check it on an AITER checkout, or write
//! its check kit (the stage is [`synth_core::aiter`]).

use std::path::{Path, PathBuf};

use synth_core::aiter::{apply, kit, render_patch, GENERATED_SUBDIR, PATCH_FILE};
use synth_core::catalog::Catalog;
use synth_core::render::{writer, Provenance};

use super::shared::emit;
use synth_base::paths::display_path;

#[derive(Debug, Clone, clap::Args)]
pub struct AiterPatchArgs {
    /// Rule file (C++, Rust or JSON) to build the patch or the check kit from [kit default:
    /// generated/rule.json of the crate].
    #[arg(long)]
    pub rule: Option<PathBuf>,
    /// Directory to write the patch into (with --rule) [default: ./gemm-synth-out/aiter/; the committed
    /// generated/aiter/ is written by `synth run`].
    #[arg(long, conflicts_with_all = ["aiter_dir", "kit"])]
    pub out: Option<PathBuf>,
    /// AITER checkout (its root) to apply the patch to; an already patched tree is reported, not patched
    /// twice.
    #[arg(long, conflicts_with = "kit")]
    pub aiter_dir: Option<PathBuf>,
    /// Patch file to apply [default: the patch of --rule, else generated/aiter/ of the crate].
    #[arg(long, requires = "aiter_dir", conflicts_with = "rule")]
    pub patch: Option<PathBuf>,
    /// Change nothing: with --aiter-dir report whether the patch applies or is applied; with --out check
    /// that the written patch is up to date.
    #[arg(long, conflicts_with = "kit")]
    pub check: bool,
    /// Write the check kit of scripts/check-aiter-patch.sh (stub headers, driver, shapes, expected
    /// choices) into this directory.
    #[arg(long)]
    pub kit: Option<PathBuf>,
    /// Random shapes in the check kit, 10000 to 1000000 [default: 20000].
    #[arg(long, requires = "kit")]
    pub shapes: Option<usize>,
    /// Seed of the check kit's shapes [default: 0].
    #[arg(long, requires = "kit")]
    pub seed: Option<u64>,
}

/// Random shapes in a check kit when `--shapes` is not given.
const DEFAULT_KIT_SHAPES: usize = 20_000;

/// The provenance of a patch built from a rule file (the dataset is not known).
pub fn rule_file_provenance(rule_path: &Path) -> Provenance {
    Provenance {
        dataset: format!(
            "not recorded: rule read from {} (synth run records dataset, device and figures)",
            display_path(rule_path)
        ),
        training: String::new(),
        figures: Vec::new(),
        command: format!("synth aiter --rule {}", synth_base::sanitize::shell_word(&display_path(rule_path))),
    }
}

/// `generated/` of the gemm-synth checkout holding the working directory (the committed main job's outputs).
/// `what`: the options that name the input instead (`--rule FILE`, or `--rule FILE (or --patch FILE)`).
fn generated_dir(what: &str) -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    super::outputs::checkout_containing(&cwd).map(|root| root.join("generated")).ok_or_else(|| {
        anyhow::anyhow!("not inside a gemm-synth checkout, so there is no generated/ to read; pass {what}")
    })
}

fn default_patch_path() -> anyhow::Result<PathBuf> {
    Ok(generated_dir("--rule FILE (or --patch FILE)")?.join(GENERATED_SUBDIR).join(PATCH_FILE))
}

pub fn run(args: AiterPatchArgs) -> anyhow::Result<()> {
    let catalog = Catalog::embedded();
    // The validation of every command that takes a rule file (`synth check`'s): a split-K past the
    // kernels' range, an unknown kernelId or too many branches never reach AITER's sources.
    let load_rule = |path: &Path| {
        synth_core::rule::load_checked(path, &catalog)
            .map_err(|e| anyhow::anyhow!("cannot use rule {}: {e:#}", display_path(path)))
    };
    if args.kit.is_none() {
        // clap's `requires` gives way to `--out`'s conflict with --kit: said here for every case.
        if let Some(flag) = [(args.shapes.is_some(), "--shapes"), (args.seed.is_some(), "--seed")]
            .iter()
            .find_map(|(given, flag)| given.then_some(*flag))
        {
            anyhow::bail!(
                "{flag} sets the check kit's shapes and applies to --kit DIR only; drop it, or add --kit DIR"
            );
        }
    }
    if let Some(dir) = &args.kit {
        let path = match &args.rule {
            Some(r) => r.clone(),
            None => generated_dir("--rule FILE")?.join("rule.json"),
        };
        let rule = load_rule(&path)?;
        let (shapes, seed) = (args.shapes.unwrap_or(DEFAULT_KIT_SHAPES), args.seed.unwrap_or(0));
        let files = kit::kit_files(&rule, &catalog, shapes, seed)?;
        super::outputs::check_out_dir_as("--kit", dir, &files, &[("--rule", path.clone())])?;
        let written = synth_core::render::outdir::write_all(dir, &files)?;
        return emit(&format!(
            "check kit for {} ({shapes} shapes, seed {seed}) written to {} ({} files)\n",
            display_path(&path),
            dir.display(),
            written.len()
        ));
    }
    if let Some(dir) = &args.aiter_dir {
        let (text, source) = match (&args.patch, &args.rule) {
            (Some(p), _) => (apply::read_patch(p)?, p.display().to_string()),
            (None, Some(r)) => {
                (render_patch(&load_rule(r)?, &catalog, &rule_file_provenance(r))?, format!("rule {}", r.display()))
            }
            (None, None) => {
                let p = default_patch_path()?;
                (apply::read_patch(&p)?, display_path(&p))
            }
        };
        let report = apply::apply(dir, &text, args.check)?;
        return emit(&format!("{}: {}\n", source, report.message(dir)));
    }
    let Some(rule_path) = &args.rule else {
        anyhow::bail!(
            "nothing to do: give --rule FILE [--out DIR] to write a patch, --aiter-dir DIR [--check] to apply one, or \
             --kit DIR for the check kit (`synth run` writes generated/aiter/{PATCH_FILE} itself)"
        );
    };
    let rule = load_rule(rule_path)?;
    let text = render_patch(&rule, &catalog, &rule_file_provenance(rule_path))?;
    // Like every command but the main job: --out, else ./gemm-synth-out/aiter/ (never the working
    // directory, which may be the checkout's generated/aiter/).
    let out = super::outputs::out_dir(args.out.as_deref(), false, "aiter")?;
    let files = [writer::GeneratedFile::new(PATCH_FILE, text)];
    super::outputs::check_out_dir(&out.dir, &files, &[("--rule", rule_path.clone())])?;
    let paths = super::outputs::write_files(&out.dir, &files, args.check)?;
    let verb = if args.check { "up to date" } else { "written" };
    emit(&paths.iter().map(|p| format!("{verb}: {}\n", p.display())).collect::<String>())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_regenerate_line_of_a_rule_file_patch_is_shell_quoted() {
        let p = super::rule_file_provenance(std::path::Path::new("my rule $(touch pwned).json"));
        assert_eq!(p.command, "synth aiter --rule 'my rule $(touch pwned).json'");
        let p = super::rule_file_provenance(std::path::Path::new("two\nlines.json"));
        assert_eq!(p.command, "synth aiter --rule $'two\\x0alines.json'");
    }
}
