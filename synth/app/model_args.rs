//! The one option group that names a model (`--model NAME`, `--spec FILE`, `--hf-config FILE`, at most one)
//! and its resolver: every command that takes a model flattens [`ModelArgs`] and reads it through
//! [`ModelArgs::load`] / [`ModelArgs::load_or`], so a new way to name a model reaches all of them at once.

use std::path::{Path, PathBuf};

use synth_core::shapes::{ModelSpec, ShapeError};

/// How a model is named on the command line (at most one of the three).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
#[group(id = "model_source", multiple = false)]
pub struct ModelArgs {
    /// Built-in model whose GEMM layers to use (`synth shapes --model NAME`: qwen3-32b, llama-3.1-8b,
    /// llama-3.1-70b, llama-3.1-405b, llama-3.2-3b, qwen2.5-0.5b, qwen2.5-7b, qwen2.5-72b, qwen3-30b-a3b,
    /// minicpm3-4b, deepseek-v2-lite, mistral-large-2411).
    #[arg(long = "model", id = "model", value_name = "NAME")]
    pub name: Option<String>,
    /// Model spec TOML file instead of a built-in model.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// The model's Hugging Face config.json instead of a built-in model (Llama, Mistral, Qwen2/3, Qwen2/3-MoE,
    /// Mixtral, DeepSeek-V2/V3, MiniCPM3, InternLM2, Phi-3, Gemma/Gemma 2 architectures).
    #[arg(long, value_name = "FILE")]
    pub hf_config: Option<PathBuf>,
}

impl ModelArgs {
    /// A built-in model by name.
    pub fn builtin(name: &str) -> ModelArgs {
        ModelArgs { name: Some(name.to_string()), ..ModelArgs::default() }
    }

    /// Whether a model was named.
    pub fn given(&self) -> bool {
        self.name.is_some() || self.spec.is_some() || self.hf_config.is_some()
    }

    /// The spec of the named model; `None` when none was named.
    pub fn load(&self) -> Result<Option<ModelSpec>, ShapeError> {
        Ok(match (&self.name, &self.spec, &self.hf_config) {
            (_, _, Some(path)) => Some(ModelSpec::load_hf_config(path)?),
            (_, Some(path), None) => Some(ModelSpec::load(path)?),
            (Some(name), None, None) => Some(ModelSpec::builtin(name)?),
            (None, None, None) => None,
        })
    }

    /// The spec of the named model, else of the built-in `default`.
    pub fn load_or(&self, default: &str) -> Result<ModelSpec, ShapeError> {
        match self.load()? {
            Some(spec) => Ok(spec),
            None => ModelSpec::builtin(default),
        }
    }

    /// The option as given (`--hf-config FILE`, `--spec FILE`, `--model NAME`), else `--model default`.
    pub fn option_text(&self, default: &str) -> String {
        let word = |p: &Path| synth_base::sanitize::shell_word(&p.display().to_string());
        match (&self.name, &self.spec, &self.hf_config) {
            (_, _, Some(p)) => format!("--hf-config {}", word(p)),
            (_, Some(p), None) => format!("--spec {}", word(p)),
            (name, None, None) => {
                format!("--model {}", synth_base::sanitize::shell_word(name.as_deref().unwrap_or(default)))
            }
        }
    }

    /// The files named (for the check that no output is an input): `(option, path)`.
    pub fn input_files(&self) -> Vec<(&'static str, PathBuf)> {
        let spec = self.spec.iter().map(|p| ("--spec", p.clone()));
        spec.chain(self.hf_config.iter().map(|p| ("--hf-config", p.clone()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_model_or_the_default() {
        assert_eq!(ModelArgs::default().load().unwrap(), None);
        assert_eq!(ModelArgs::default().load_or("llama-3.1-8b").unwrap().name, "llama-3.1-8b");
        assert_eq!(ModelArgs::builtin("qwen3-32b").load_or("llama-3.1-8b").unwrap().name, "qwen3-32b");
        assert_eq!(ModelArgs::default().option_text("qwen3-32b"), "--model qwen3-32b");
        let hf = ModelArgs { hf_config: Some("my dir/config.json".into()), ..ModelArgs::default() };
        assert_eq!(hf.option_text("x"), "--hf-config 'my dir/config.json'");
        assert_eq!(hf.input_files(), vec![("--hf-config", PathBuf::from("my dir/config.json"))]);
    }
}
