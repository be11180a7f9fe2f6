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

/// Runs `cmd` to completion, or kills it after `limit` and fails (a hang).
pub fn run_bounded(cmd: &mut Command, limit: std::time::Duration) -> (Output, std::time::Duration) {
    use std::io::Read;
    use wait_timeout::ChildExt;
    let started = std::time::Instant::now();
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let status = match child.wait_timeout(limit).unwrap() {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command hung (killed after {limit:?}): {cmd:?}");
        }
    };
    (Output { status, stdout: t_out.join().unwrap(), stderr: t_err.join().unwrap() }, started.elapsed())
}

/// The runtimes' lookup over a config file as Python's `json.load` keeps it (keys in file order):
/// `min(keys, key=|key - M|)`, ties to the first key.
pub fn runtime_lookup(text: &str, m: u32) -> String {
    // serde_json's map sorts its keys; the file order (which decides ties) is read from the lines
    // `"M": {` as the files are written.
    let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).unwrap();
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('"')?.split_once("\": {").map(|(key, _)| key))
        .collect();
    assert_eq!(order.len(), doc.len(), "one key per line");
    let mut best: Option<(u32, &serde_json::Value)> = None;
    for key in order {
        let d = key.parse::<u32>().unwrap().abs_diff(m);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, &doc[key]));
        }
    }
    let c = best.unwrap().1;
    let v = |k: &str| c[k].as_u64().unwrap();
    format!(
        "triton_bm{}_bn{}_bk{}_g{}_w{}_s{}",
        v("BLOCK_SIZE_M"),
        v("BLOCK_SIZE_N"),
        v("BLOCK_SIZE_K"),
        v("GROUP_SIZE_M"),
        v("num_warps"),
        v("num_stages")
    )
}
