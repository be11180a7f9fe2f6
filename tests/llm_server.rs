//! The LLM path against a real model: SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1
//! (`scripts/llm-server.sh`). What a real model writes (prose, fences, programs instead of rules, answers cut
//! at the token limit) must come back as scored candidates or as feedback, and its prompts must fit. Each
//! case makes one proposal with a short answer (`--max-tokens`); the rule cases on a three-kernel table
//! (small prompt, grammar and schema), constrained to the rule language by the grammar and by the schema, the
//! knob rewrite by the schema of its knob values. llama.cpp's grammar sampler costs about 0.5 s a token on 2
//! busy cores, so the answers asked for are a few dozen tokens; the five cases take about 90 s on 2 cores
//! once the server runs.
//!
//! Which server: `GEMM_SYNTH_LLM_URL` (the base URL, `.../v1`) and `GEMM_SYNTH_LLM_MODEL` when set (`.ci/run`
//! sets both through `scripts/llm-server.sh run`); otherwise these tests start the server themselves with
//! `scripts/llm-server.sh serve` (installing it on first use: about 7 minutes on 2 cores, then cached). A
//! server that cannot be reached or started fails the tests. `GEMM_SYNTH_LLM_TESTS=skip` skips them on a
//! developer machine, saying so; nothing else does.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

struct Server {
    url: String,
    model: String,
}

/// The server of this test process, or None when the tests are switched off (`GEMM_SYNTH_LLM_TESTS=skip`).
fn server() -> Option<&'static Server> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    SERVER.get_or_init(start).as_ref()
}

fn start() -> Option<Server> {
    let model = std::env::var("GEMM_SYNTH_LLM_MODEL").unwrap_or_else(|_| "smollm2-135m-instruct".into());
    if let Ok(url) = std::env::var("GEMM_SYNTH_LLM_URL") {
        return Some(Server { url, model });
    }
    if std::env::var("GEMM_SYNTH_LLM_TESTS").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: the LLM tests (GEMM_SYNTH_LLM_TESTS=skip)");
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/llm-server.sh");
    let mut child = Command::new("bash")
        .arg(&script)
        .arg("serve")
        .env("GEMM_SYNTH_LLM_PARENT_PID", std::process::id().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("GEMM_SYNTH_LLM_URL=") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    // A first install builds llama.cpp (minutes); a cached one starts in seconds.
    let url = rx.recv_timeout(Duration::from_secs(45 * 60)).unwrap_or_else(|_| {
        panic!(
            "{} serve did not print the server's URL (its messages are above); set GEMM_SYNTH_LLM_URL to a running \
             server, or GEMM_SYNTH_LLM_TESTS=skip to skip these tests",
            script.display()
        )
    });
    // The script stops the server when this process exits (GEMM_SYNTH_LLM_PARENT_PID).
    std::mem::forget(child);
    Some(Server { url, model })
}

fn synth() -> Command {
    Command::new(env!("CARGO_BIN_EXE_synth"))
}

fn trace(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().expect("synth runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Every proposal was either scored or turned into feedback, and what the model said is in the trace.
fn check_proposals(attempts: &[serde_json::Value], log: &str) -> usize {
    let mut answered = 0;
    for a in attempts.iter().filter(|a| a["iteration"].as_u64() != Some(0)) {
        let id = &a["id"];
        let feedback = a["eval"]["feedback"].as_str().unwrap_or("");
        let scored = a["eval"]["score"].is_number();
        assert!(scored || !feedback.trim().is_empty(), "attempt {id} failed without feedback\n{log}");
        assert!(!a["reflection"].as_str().unwrap_or("").is_empty(), "attempt {id} has no reflection");
        // Prompts fit: no proposal was refused for its length.
        assert!(!feedback.contains("HTTP 400"), "attempt {id}: {feedback}");
        let agent = &a["agent"];
        if agent.get("finish_reason").is_some() {
            answered += 1;
            let raw = a["raw"].as_str().unwrap_or_else(|| panic!("attempt {id} lost the model's answer"));
            assert!(!raw.is_empty() || !scored, "attempt {id}");
            if !scored && a["candidate"].as_str().unwrap_or("").is_empty() {
                // No candidate: the feedback says why, from the model's own text.
                assert!(
                    feedback.contains("no code block")
                        || feedback.contains("cut at the token limit")
                        || feedback.contains("empty"),
                    "attempt {id}: {feedback}"
                );
            }
            // The estimate over-counts the model's tokenizer on the real prompt (plus the chat template).
            let estimate = agent["prompt"]["estimate"].as_u64().unwrap();
            let limit = agent["prompt"]["limit"].as_u64().unwrap();
            let counted = agent["usage"]["prompt_tokens"].as_u64().unwrap();
            assert!(estimate <= limit, "attempt {id}: estimate {estimate} over its limit {limit}");
            assert!(
                counted <= estimate + 48,
                "attempt {id}: the server counted {counted} tokens, estimated {estimate}"
            );
        }
    }
    answered
}

/// The first proposal of a one-proposal run (the trace's entry after the baseline).
fn the_proposal(attempts: &[serde_json::Value], log: &str) -> serde_json::Value {
    assert_eq!(attempts.len(), 2, "the baseline and one proposal\n{log}");
    attempts[1].clone()
}

/// A small latency table for the rule proposals: the embedded H200 table's rows of three kernels (the
/// default #7 among them) without split-K, so the prompt, the grammar and the schema are small and one
/// constrained answer takes seconds.
fn small_dataset(dir: &Path) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("measurements/h200/qwen3-32b-tp2.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let col = |name: &str| header.split(',').position(|c| c == name).unwrap();
    let (kernel, split) = (col("kernelId"), col("splitK"));
    let mut out = format!("{header}\n");
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        if ["0", "2", "7"].contains(&cells[kernel]) && cells[split] == "0" {
            out.push_str(line);
            out.push('\n');
        }
    }
    let small = dir.join("small.csv");
    std::fs::write(&small, out).unwrap();
    small
}

/// One rule proposal of the model constrained by `constrain` (one request, a short answer): the constraint
/// the probe settled is the one asked for, and an answer the model finished parses as a rule.
fn search_once(constrain: &str, said: &str) {
    let Some(s) = server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("search");
    let data = small_dataset(dir.path());
    let (ok, log) = run(synth()
        .args(["search", "--agent", "openai", "--base-url", &s.url, "--chat-model", &s.model])
        .args(["--constrain", constrain, "--iterations", "1", "--offspring", "1", "--agent-timeout", "300"])
        .args(["--dataset", data.to_str().unwrap(), "--features", "raw", "--max-depth", "2"])
        // A prompt of the fixed part and a few table rows, and a short answer, keep the request to seconds.
        .args(["--context-tokens", "1800", "--max-tokens", "80", "--out", out.to_str().unwrap()]));
    // The loop completes: a result, or the one error saying that no proposal was usable.
    assert!(ok || log.contains("every one of the 1 proposals failed"), "{log}");
    assert!(log.contains("proposer: openai:"), "{log}");
    assert!(log.contains(&format!("constrain: {said}")), "the server should honour {constrain}\n{log}");
    let attempts = trace(&out.join("trace.jsonl"));
    assert_eq!(check_proposals(&attempts, &log), 1, "the model never answered\n{log}");
    let a = the_proposal(&attempts, &log);
    assert!(a["agent"]["constraint"].as_str().unwrap().starts_with(said), "{a}");
    if a["agent"]["finish_reason"] == "stop" {
        // A finished answer of the constrained model is a rule: it parses (the evaluation goes past parsing).
        assert_ne!(a["eval"]["details"]["stage"], "parse", "{a}");
    }
}

#[test]
fn a_rule_proposal_under_the_grammar_parses() {
    // `auto` probes the server: llama-cpp-python honours the GBNF grammar.
    search_once("auto", "grammar");
}

#[test]
fn a_rule_proposal_under_the_json_schema_parses() {
    search_once("json-schema", "json-schema");
}

#[test]
fn a_knob_rewrite_under_the_json_schema_builds_and_is_scored() {
    let Some(s) = server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rewrite");
    let spec = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llm_rewrite_knobs/spec.toml");
    // Under the schema the answer is the object of knob values (a dozen tokens), not the whole file.
    let (ok, log) = run(synth()
        .args(["rewrite", "--task", spec.to_str().unwrap(), "--agent", "openai", "--base-url", &s.url])
        .args(["--chat-model", &s.model, "--iterations", "1", "--offspring", "1", "--agent-timeout", "300"])
        .args(["--constrain", "json-schema", "--context-tokens", "2048", "--max-tokens", "48"])
        .args(["--out", out.to_str().unwrap()]));
    assert!(ok || log.contains("every one of the 1 proposals failed"), "{log}");
    assert!(log.contains("constrain: json-schema"), "{log}");
    let attempts = trace(&out.join("trace.jsonl"));
    assert_eq!(check_proposals(&attempts, &log), 1, "the model never answered\n{log}");
    let a = the_proposal(&attempts, &log);
    if a["agent"]["finish_reason"] == "stop" {
        // The schema lets the model choose only the knob's value: the file built from it runs and is scored.
        let candidate = a["candidate"].as_str().unwrap();
        assert!(["1", "2", "4"].iter().any(|v| candidate.contains(&format!("#define STEP {v}\n"))), "{candidate}");
        assert!(a["eval"]["score"].is_number(), "{a}");
    }
}

#[test]
fn a_rewrite_of_a_whole_file_turns_build_errors_and_mismatches_into_feedback() {
    let Some(s) = server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rewrite");
    let spec = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llm_rewrite/spec.toml");
    let (ok, log) = run(synth()
        .args(["rewrite", "--task", spec.to_str().unwrap(), "--agent", "openai", "--base-url", &s.url])
        .args(["--chat-model", &s.model, "--iterations", "1", "--offspring", "1", "--agent-timeout", "300"])
        // Unconstrained: the whole-file grammar shortens nothing and costs llama.cpp's grammar sampler ~5x
        // per token on 2 cores.
        .args(["--constrain", "none", "--context-tokens", "2048", "--max-tokens", "160"])
        .args(["--out", out.to_str().unwrap()]));
    // The loop completes: a result, or the one error saying that no proposal built and ran (a small
    // model often writes none that does); either way every attempt is in the trace and the report.
    assert!(ok || log.contains("every one of the 1 proposals failed"), "{log}");
    assert!(out.join("report.txt").is_file(), "{log}");
    let attempts = trace(&out.join("trace.jsonl"));
    assert_eq!(check_proposals(&attempts, &log), 1, "the model never answered\n{log}");
    let a = the_proposal(&attempts, &log);
    let feedback = a["eval"]["feedback"].as_str().unwrap_or("");
    match a["eval"]["details"]["status"].as_str() {
        Some("build_error") => {
            // The compiler's errors located in the rewritten file, or the linker's with a note naming
            // the symbol the rewritten file must define (or defines twice).
            let located = feedback.contains("kernel.c:");
            let linked = feedback.contains("note: the") && feedback.contains("kernel.c");
            assert!(feedback.contains("build failed") && (located || linked), "{feedback}");
        }
        Some("mismatch") | Some("run_error") => {
            assert!(feedback.contains("correct") || feedback.contains("exit"), "{feedback}");
        }
        Some("ok") => assert!(a["eval"]["score"].is_number(), "{a}"),
        Some(other) => assert!(!feedback.is_empty(), "status {other} without feedback"),
        None => assert_eq!(a["eval"]["details"]["stage"], "propose", "{a}"),
    }
}

/// The token estimate (one per byte) against the model's own tokenizer (llama-cpp-python's
/// `/extras/tokenize/count`) on every paragraph of real prompts: the rule prompt of the embedded dataset and
/// of the multi-model manifest, as `synth search` hands them to an agent.
#[test]
fn the_token_estimate_over_counts_the_models_tokenizer_on_real_prompts() {
    let Some(s) = server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut prompts = Vec::new();
    for (name, data) in [("single", None), ("manifest", Some("measurements/h200/datasets.toml"))] {
        let dump = dir.path().join(format!("{name}.json"));
        let mut cmd = synth();
        cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args(["search", "--iterations", "1", "--offspring", "1"]);
        cmd.arg("--agent").arg(format!("cmd:cat > {}; echo no rule", dump.display()));
        cmd.arg("--out").arg(dir.path().join(name)).arg("--quiet");
        if let Some(d) = data {
            cmd.args(["--dataset", d]);
        }
        let _ = run(&mut cmd); // the agent proposes nothing; only its request is wanted
        let req: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
        for m in req["messages"].as_array().unwrap() {
            prompts.push(m["content"].as_str().unwrap().to_string());
        }
    }
    let base = s.url.trim_end_matches('/').trim_end_matches("/v1");
    // A count waits while the server answers another test's proposal.
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(300)).build();
    let count = |text: &str| -> u64 {
        let r: serde_json::Value = agent
            .post(&format!("{base}/extras/tokenize/count"))
            .send_json(serde_json::json!({ "input": text }))
            .unwrap_or_else(|e| panic!("{base}/extras/tokenize/count: {e}"))
            .into_json()
            .unwrap();
        r["count"].as_u64().unwrap()
    };
    let (mut bytes, mut tokens, mut lowest) = (0u64, 0u64, f64::INFINITY);
    for p in &prompts {
        for part in p.split("\n\n").filter(|x| !x.trim().is_empty()) {
            let n = count(part);
            let estimate = synth_engine::engine::proposers::prompt::estimate_tokens(part) as u64;
            assert!(n <= estimate, "{n} tokens, estimated {estimate}: {part:?}");
            lowest = lowest.min(part.len() as f64 / n as f64);
            bytes += part.len() as u64;
            tokens += n;
        }
    }
    eprintln!(
        "{} prompts: {bytes} bytes, {tokens} tokens ({:.3} bytes per token; lowest paragraph {lowest:.3})",
        prompts.len(),
        bytes as f64 / tokens as f64
    );
    assert!(tokens > 5000, "{tokens}");
}
