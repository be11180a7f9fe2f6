//! `synth check FILE`: parse a rule file, validate it, print the issues and the canonical form.

use std::path::PathBuf;

use anyhow::Context as _;

use synth_core::catalog::Catalog;
use synth_core::rule::source::Form;
use synth_core::rule::validate::{has_errors, validate_with_source};

/// Arguments of `synth check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Rule file: C++ (`.cpp`, `.h`, ...), Rust (`.rs`) or JSON (`.json`); other extensions are detected
    /// from the content.
    pub file: PathBuf,
    /// Form to print the canonical rule in.
    #[arg(long, value_enum, default_value_t = Form::Cpp)]
    pub format: Form,
    /// Form the file is written in (default: from the extension, else detected).
    #[arg(long, value_enum)]
    pub input_format: Option<Form>,
    /// Instance catalog directory (default: the embedded `ck-instances/`).
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

/// Runs `synth check`: exits with an error when the file does not parse or has error-level issues.
pub fn run(args: CheckArgs) -> anyhow::Result<()> {
    let catalog = match &args.catalog {
        Some(dir) => Catalog::load_dir(dir).with_context(|| format!("loading the catalog from {}", dir.display()))?,
        None => Catalog::embedded(),
    };
    let parsed = synth_core::rule::load_with_source(&args.file, &catalog, args.input_format)?;
    let issues = validate_with_source(&parsed.rule, &catalog, &parsed.source);
    // The file name goes to the terminal: its control and bidi characters are shown as code points.
    let file = synth_base::sanitize::shown(&args.file.display().to_string());
    for issue in &issues {
        match issue.line {
            Some(line) => errln!("{file}:{line}: {}: {}", issue.severity, issue.message),
            None => errln!("{file}: {}: {}", issue.severity, issue.message),
        }
    }
    let rule = &parsed.rule;
    let text = match args.format {
        Form::Cpp => synth_core::rule::text::rule_to_cpp_text(rule, &catalog),
        Form::Rust => synth_core::rule::text::rule_to_rust_text(rule, &catalog),
        Form::Json => synth_core::rule::to_json(rule) + "\n",
    };
    out!("{text}");
    let vars: Vec<&str> = rule.vars_used().into_iter().map(|v| v.upper()).collect();
    errln!(
        "{file}: read as {}; {} leaves, depth {}, {} distinct instances, variables [{}]; {} issue(s)",
        parsed.form,
        rule.num_leaves(),
        rule.depth(),
        rule.instances_used().len(),
        vars.join(", "),
        issues.len()
    );
    if has_errors(&issues) {
        anyhow::bail!("{file}: the rule has errors (listed above)");
    }
    Ok(())
}
