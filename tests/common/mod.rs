//! Fixtures shared by the integration tests that run the `synth` binary with a fake harness or tuner.

#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `synth` in the crate root with `args` and extra environment variables.
pub fn synth(args: &[String], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synth"));
    c.current_dir(env!("CARGO_MANIFEST_DIR")).args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("synth runs")
}

/// [`synth`] with environment values built at run time.
pub fn synth_owned(args: &[String], envs: &[(&str, String)]) -> Output {
    synth(args, &envs.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>())
}

/// Standard output followed by standard error.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Owned arguments.
pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
