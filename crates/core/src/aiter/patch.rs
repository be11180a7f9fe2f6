//! The patch for AITER main: rendering (templates in `templates/aiter/`), and a strict unified-diff
//! parser used to check it and to explain hunks that no longer apply.
//!
//! The patch adds two files and changes two:
//! - [`HEADER_PATH`] (new): the standalone dispatcher of [`crate::render::render_cpp`] followed by the
//!   AITER switch `a8w8_blockscale_heuristic_enabled()` ([`ENV_VAR`]);
//! - [`KERNELS_PATH`] (new): the kernel list `gen_instances.py` merges into the kernels it builds;
//! - [`CU_PATH`]: an empty kernelName picks kernel and splitK with the heuristic;
//! - [`GEN_INSTANCES_PATH`]: the codegen calls `add_heuristic_kernels`.
//!
//! A rule with leaves of another backend (`--backends ck,triton`) adds two more: [`SELECT_PATH`] (new),
//! the rule as the Python module of [`crate::render::render_python`], and [`OPS_PATH`]: an untuned shape
//! whose leaf is triton runs AITER's Triton blockscale GEMM with the leaf's config, a CK leaf goes on to
//! the C++ heuristic, under the same [`ENV_VAR`]; the header returns no CK kernel (nullptr) for such a
//! leaf and the dispatch then runs the default kernel. Leaves AITER cannot call there (vendor, CK-tile)
//! get no patch ([`unroutable`]).
//!
//! Hunks of the changed files are written against AITER e4048607a5 with only their old start line; the
//! renderer computes every `@@ -a,b +c,d @@` header from the lines themselves.

use serde::Serialize;

use super::templates::{
    render_template, CU_TEMPLATE, GEN_TEMPLATE, KERNELS_MODULE_TEMPLATE, OPS_TEMPLATE, TAIL_TEMPLATE,
};
use crate::catalog::Catalog;
use crate::catalog::Libtype;
use crate::render::{self, leaf_instance, resolved, writer, Provenance};
use crate::rule::Rule;

/// The AITER commit the hunks are written against.
pub const AITER_COMMIT: &str = "e4048607a5";
/// File name of the generated patch (under `generated/aiter/` for `synth run`).
pub const PATCH_FILE: &str = "gemm_a8w8_blockscale_heuristic.patch";
/// The heuristic header inside AITER (in the module's include directory, which the JIT build puts on the
/// include path, hipified or not).
pub const HEADER_PATH: &str = "csrc/ck_gemm_a8w8_blockscale/include/gemm_a8w8_blockscale_heuristic.h";
/// The kernel list module inside AITER (next to `gen_instances.py`, which imports it).
pub const KERNELS_PATH: &str = "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_heuristic_kernels.py";
/// AITER's dispatch source.
pub const CU_PATH: &str = "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale.cu";
/// AITER's codegen for the CK blockscale module.
pub const GEN_INSTANCES_PATH: &str = "csrc/ck_gemm_a8w8_blockscale/gen_instances.py";
/// AITER's Python entry of the blockscale GEMM (the untuned path chooses the backend there).
pub const OPS_PATH: &str = "aiter/ops/gemm_op_a8w8.py";
/// The rule as a Python module inside AITER (next to `gemm_op_a8w8.py`, which imports it).
pub const SELECT_PATH: &str = "aiter/ops/gemm_a8w8_blockscale_select.py";
/// BLOCK_SIZE_K AITER's Triton blockscale GEMM runs: it asserts `GROUP_K == BLOCK_SIZE_K`, the 128-wide
/// scale group (`aiter/ops/triton/gemm/basic/gemm_a8w8_blockscale.py` at e4048607a5).
pub const AITER_TRITON_BLOCK_K: u32 = 128;

/// Why AITER's untuned path cannot run `rule`'s leaves, if it cannot: a vendor or CK-tile leaf (no
/// route on that path at e4048607a5), or a triton config AITER's Triton kernel refuses.
pub fn unroutable(rule: &Rule) -> Option<String> {
    let mut why = Vec::new();
    for leaf in rule.instances_used() {
        match leaf.backend {
            Libtype::Ck => {}
            Libtype::Triton => match crate::catalog::triton::TritonConfig::from_kernel_id(i64::from(leaf.kernel_id)) {
                Ok(c) if c.block_k == AITER_TRITON_BLOCK_K => {}
                Ok(c) => why.push(format!(
                    "triton config {} has BLOCK_SIZE_K {}; AITER's Triton blockscale GEMM runs {AITER_TRITON_BLOCK_K} \
                     only (GROUP_K == BLOCK_SIZE_K)",
                    c.name(),
                    c.block_k
                )),
                Err(e) => why.push(e.to_string()),
            },
            b => why.push(format!("{} ({b}): AITER's untuned blockscale path has no {b} route", leaf.candidate())),
        }
    }
    why.dedup();
    (!why.is_empty()).then(|| why.join("; "))
}

/// Whether the rule has leaves of a backend other than CK legacy.
pub fn is_mixed(rule: &Rule) -> bool {
    rule.leaves().iter().any(|l| !l.is_ck())
}

/// Environment variable of the patched AITER: `0` restores AITER's fixed default kernel.
pub const ENV_VAR: &str = "AITER_BLOCKSCALE_HEURISTIC";
/// Largest splitK AITER's `gemm_a8w8_blockscale` accepts (KBatch = 1 << splitK).
pub const MAX_SPLIT_K: u32 = 30;

/// A kernel the rule can return, as the kernel list names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeuristicKernel {
    /// kernelId in AITER's `candidate_kernels_dict`.
    pub id: i32,
    /// Kernel name (a C++ identifier).
    pub name: String,
}

/// The distinct kernels `rule` returns (ascending kernelId), each checked to be a legacy catalog instance
/// whose name is a C++ identifier, and every leaf's splitK checked against [`MAX_SPLIT_K`].
pub fn heuristic_kernels(rule: &Rule, catalog: &Catalog) -> anyhow::Result<Vec<HeuristicKernel>> {
    let rule = resolved(rule, catalog)?;
    let mut out: Vec<HeuristicKernel> = Vec::new();
    // Leaves of other backends are no kernel of AITER's CK module (the Python side runs them).
    for leaf in rule.instances_used().into_iter().filter(|l| l.is_ck()) {
        if leaf.split_k > MAX_SPLIT_K {
            anyhow::bail!(
                "the rule returns kernelId {} with splitK {}, but AITER's gemm_a8w8_blockscale accepts splitK 0..={} \
                 (KBatch = 1 << splitK); limit the rule's split-K",
                leaf.kernel_id,
                leaf.split_k,
                MAX_SPLIT_K
            );
        }
        let inst = leaf_instance(catalog, &leaf)?;
        let ident = !inst.name.is_empty()
            && !inst.name.starts_with(|c: char| c.is_ascii_digit())
            && inst.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            anyhow::bail!(
                "catalog instance {} is named {:?}, which is not a C++ identifier; fix ck-instances/",
                inst.id,
                inst.name
            );
        }
        if !out.iter().any(|k| k.id == inst.id) {
            out.push(HeuristicKernel { id: inst.id, name: inst.name.clone() });
        }
    }
    out.sort_by_key(|k| k.id);
    Ok(out)
}

/// The provenance of the AITER files: `provenance` with a note that the rule is for the GPU it was
/// measured on.
pub fn aiter_provenance(provenance: &Provenance) -> Provenance {
    let mut p = provenance.clone();
    let dataset = if p.dataset.trim().is_empty() { "(not recorded)".to_string() } else { p.dataset.clone() };
    p.dataset = format!(
        "{dataset}\nA rule measured on one GPU is for that GPU: on another GPU (or a new ROCm/driver), measure \
         (synth bench), regenerate and re-check before relying on it."
    );
    p
}

/// The heuristic header as the patch adds it at [`HEADER_PATH`].
pub fn render_aiter_header(rule: &Rule, catalog: &Catalog, provenance: &Provenance) -> anyhow::Result<String> {
    heuristic_kernels(rule, catalog)?;
    let mut text = render::render_cpp(rule, catalog, &aiter_provenance(provenance))?;
    text.push_str(&render_template(
        TAIL_TEMPLATE,
        minijinja::context! { env_var => ENV_VAR, kernels_module => file_name(KERNELS_PATH) },
    )?);
    Ok(text)
}

/// The kernel list module as the patch adds it at [`KERNELS_PATH`].
pub fn render_kernels_module(rule: &Rule, catalog: &Catalog, provenance: &Provenance) -> anyhow::Result<String> {
    let kernels = heuristic_kernels(rule, catalog)?;
    let lines = writer::header_lines(file_name(KERNELS_PATH), &aiter_provenance(provenance), &resolved(rule, catalog)?);
    render_template(KERNELS_MODULE_TEMPLATE, minijinja::context! { provenance => lines, kernels => kernels })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// One hunk: the old side's first line (1-based; 0 for a new file) and its lines, each with its marker
/// (' ' context, '-' removed, '+' added).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// First line of the old side (1-based), 0 for an added file.
    pub old_start: usize,
    /// First line of the new side (1-based).
    pub new_start: usize,
    /// Marker and text of each line.
    pub lines: Vec<(char, String)>,
}

impl Hunk {
    /// Lines on the old side (context and removed).
    pub fn old_len(&self) -> usize {
        self.lines.iter().filter(|(c, _)| *c != '+').count()
    }
    /// Lines on the new side (context and added).
    pub fn new_len(&self) -> usize {
        self.lines.iter().filter(|(c, _)| *c != '-').count()
    }
    /// The old side's text.
    pub fn old_text(&self) -> String {
        side_text(&self.lines, '+')
    }
    /// The new side's text.
    pub fn new_text(&self) -> String {
        side_text(&self.lines, '-')
    }
    fn header(&self) -> String {
        format!("@@ -{} +{} @@", range(self.old_start, self.old_len()), range(self.new_start, self.new_len()))
    }
}

fn side_text(lines: &[(char, String)], skip: char) -> String {
    lines.iter().filter(|(c, _)| *c != skip).map(|(_, l)| format!("{l}\n")).collect()
}

fn range(start: usize, len: usize) -> String {
    if len == 1 {
        start.to_string()
    } else {
        format!("{start},{len}")
    }
}

/// One file of the patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// Path relative to the AITER root.
    pub path: String,
    /// Whether the patch creates the file.
    pub new_file: bool,
    /// Hunks in file order.
    pub hunks: Vec<Hunk>,
}

impl FilePatch {
    /// A patch creating `path` with `contents` (which must end in a newline).
    pub fn new_file(path: &str, contents: &str) -> anyhow::Result<FilePatch> {
        if !contents.ends_with('\n') {
            anyhow::bail!("generated file {path} does not end in a newline");
        }
        let lines = contents.lines().map(|l| ('+', l.to_string())).collect();
        Ok(FilePatch { path: path.into(), new_file: true, hunks: vec![Hunk { old_start: 0, new_start: 1, lines }] })
    }

    /// A patch changing `path` by the hunks of `spec` (`@@ N` starts a hunk at old line N; every other
    /// line starts with ' ', '-' or '+'); new start lines follow from the earlier hunks.
    pub fn from_spec(path: &str, spec: &str, origin: &str) -> anyhow::Result<FilePatch> {
        let mut hunks: Vec<Hunk> = Vec::new();
        for (i, line) in spec.lines().enumerate() {
            let bad = |what: &str| anyhow::anyhow!("{origin}:{}: {what}: {line:?}", i + 1);
            if let Some(rest) = line.strip_prefix("@@ ") {
                let old_start: usize = rest.trim().parse().map_err(|_| bad("a hunk start needs a line number"))?;
                if hunks.last().is_some_and(|h| h.old_start + h.old_len() > old_start) {
                    return Err(bad("hunks overlap or are out of order"));
                }
                hunks.push(Hunk { old_start, new_start: 0, lines: Vec::new() });
                continue;
            }
            let hunk = hunks.last_mut().ok_or_else(|| bad("diff line before the first hunk"))?;
            let mut chars = line.chars();
            match chars.next() {
                Some(c @ (' ' | '-' | '+')) => hunk.lines.push((c, chars.as_str().to_string())),
                _ => return Err(bad("a diff line starts with ' ', '-' or '+'")),
            }
        }
        let mut delta: isize = 0;
        for h in &mut hunks {
            if h.old_len() == 0 {
                anyhow::bail!("{origin}: the hunk at line {} has no context or removed line", h.old_start);
            }
            let lead = h.lines.iter().take_while(|(c, _)| *c == ' ').count();
            let trail = h.lines.iter().rev().take_while(|(c, _)| *c == ' ').count();
            if lead != trail {
                anyhow::bail!(
                    "{origin}: the hunk at line {} has {lead} leading and {trail} trailing context lines; git apply \
                     anchors such a hunk to the start or end of the file: give both sides the same number",
                    h.old_start
                );
            }
            h.new_start = (h.old_start as isize + delta) as usize;
            delta += h.new_len() as isize - h.old_len() as isize;
        }
        if hunks.is_empty() {
            anyhow::bail!("{origin}: no hunk");
        }
        Ok(FilePatch { path: path.into(), new_file: false, hunks })
    }

    /// The unified diff text of this file (git's format, as `git apply` reads it).
    pub fn to_text(&self) -> String {
        let mut out = format!("diff --git a/{0} b/{0}\n", self.path);
        if self.new_file {
            out += &format!("new file mode 100644\n--- /dev/null\n+++ b/{}\n", self.path);
        } else {
            out += &format!("--- a/{0}\n+++ b/{0}\n", self.path);
        }
        for h in &self.hunks {
            out += &h.header();
            out.push('\n');
            for (c, l) in &h.lines {
                out.push(*c);
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// The diff text of hunk `i` alone (for checking one hunk against a tree).
    pub fn hunk_text(&self, i: usize) -> String {
        let one = FilePatch {
            path: self.path.clone(),
            new_file: self.new_file,
            hunks: vec![Hunk { new_start: self.hunks[i].old_start.max(1), ..self.hunks[i].clone() }],
        };
        one.to_text()
    }
}

/// The patch's files, in the order they are written.
pub fn patch_files(rule: &Rule, catalog: &Catalog, provenance: &Provenance) -> anyhow::Result<Vec<FilePatch>> {
    if let Some(why) = unroutable(rule) {
        anyhow::bail!("no AITER patch for this rule: {why}; leave those backends out of --backends for AITER");
    }
    let mixed = is_mixed(rule);
    let ctx = minijinja::context! {
        header => file_name(HEADER_PATH),
        env_var => ENV_VAR,
        kernels_module => file_name(KERNELS_PATH),
        kernels_module_name => file_name(KERNELS_PATH).trim_end_matches(".py"),
        mixed => mixed,
        select_module => file_name(SELECT_PATH),
        select_module_name => file_name(SELECT_PATH).trim_end_matches(".py"),
    };
    let mut files = vec![
        FilePatch::new_file(HEADER_PATH, &render_aiter_header(rule, catalog, provenance)?)?,
        FilePatch::new_file(KERNELS_PATH, &render_kernels_module(rule, catalog, provenance)?)?,
        FilePatch::from_spec(CU_PATH, &render_template(CU_TEMPLATE, &ctx)?, &format!("templates/{CU_TEMPLATE}"))?,
        FilePatch::from_spec(
            GEN_INSTANCES_PATH,
            &render_template(GEN_TEMPLATE, &ctx)?,
            &format!("templates/{GEN_TEMPLATE}"),
        )?,
    ];
    if mixed {
        let python = render::render_python(rule, catalog, &aiter_provenance(provenance))?;
        files.push(FilePatch::new_file(SELECT_PATH, &python)?);
        files.push(FilePatch::from_spec(
            OPS_PATH,
            &render_template(OPS_TEMPLATE, &ctx)?,
            &format!("templates/{OPS_TEMPLATE}"),
        )?);
    }
    Ok(files)
}

/// The whole patch: a leading note (which `git apply` ignores) and the files' diffs.
pub fn render_patch(rule: &Rule, catalog: &Catalog, provenance: &Provenance) -> anyhow::Result<String> {
    let mut out = format!(
        "gemm-synth: kernel selection for AITER's untuned a8w8 blockscale path (written against ROCm/aiter \
         {AITER_COMMIT}).\nApply at the root of an AITER checkout: synth aiter --aiter-dir DIR (or git apply {PATCH_FILE});\n\
         then rebuild module_gemm_a8w8_blockscale. {ENV_VAR}=0 restores AITER's fixed default kernel.\n\n"
    );
    for f in patch_files(rule, catalog, provenance)? {
        out += &f.to_text();
    }
    Ok(out)
}

/// Parses a patch in the format [`render_patch`] writes (and git writes): text before the first
/// `diff --git` line is ignored; every hunk's line counts must match its header.
pub fn parse_patch(text: &str) -> anyhow::Result<Vec<FilePatch>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut files: Vec<FilePatch> = Vec::new();
    let mut i = lines.iter().position(|l| l.starts_with("diff --git ")).unwrap_or(lines.len());
    while i < lines.len() {
        let at = |i: usize, what: &str| anyhow::anyhow!("patch line {}: {what}: {:?}", i + 1, lines[i]);
        let Some(rest) = lines[i].strip_prefix("diff --git a/") else { return Err(at(i, "expected `diff --git`")) };
        let path = rest.split(" b/").next().unwrap_or("").to_string();
        i += 1;
        let new_file = lines.get(i).is_some_and(|l| l.starts_with("new file mode "));
        if new_file {
            i += 1;
        }
        let (old, new) = (lines.get(i).copied().unwrap_or(""), lines.get(i + 1).copied().unwrap_or(""));
        let want_old = if new_file { "--- /dev/null".to_string() } else { format!("--- a/{path}") };
        if old != want_old || new != format!("+++ b/{path}") {
            return Err(at(i.min(lines.len() - 1), &format!("expected `{want_old}` and `+++ b/{path}`")));
        }
        i += 2;
        let mut hunks = Vec::new();
        while i < lines.len() && lines[i].starts_with("@@ ") {
            let (os, oc, ns, nc) = parse_header(lines[i]).ok_or_else(|| at(i, "malformed hunk header"))?;
            let header_line = i;
            i += 1;
            let mut hunk = Hunk { old_start: os, new_start: ns, lines: Vec::new() };
            while hunk.old_len() < oc || hunk.new_len() < nc {
                let line = lines.get(i).ok_or_else(|| at(header_line, "hunk ends before its counts"))?;
                let mut chars = line.chars();
                match chars.next() {
                    Some(c @ (' ' | '-' | '+')) => hunk.lines.push((c, chars.as_str().to_string())),
                    _ => return Err(at(i, "a hunk line starts with ' ', '-' or '+'")),
                }
                i += 1;
            }
            if hunk.old_len() != oc || hunk.new_len() != nc {
                return Err(at(header_line, "line counts do not match the header"));
            }
            hunks.push(hunk);
        }
        if hunks.is_empty() {
            return Err(at(i.min(lines.len() - 1), "file without hunks"));
        }
        files.push(FilePatch { path, new_file, hunks });
    }
    if files.is_empty() {
        anyhow::bail!("no `diff --git` section: not a patch");
    }
    Ok(files)
}

fn parse_header(line: &str) -> Option<(usize, usize, usize, usize)> {
    let body = line.strip_prefix("@@ -")?.strip_suffix(" @@")?;
    let (old, new) = body.split_once(" +")?;
    let side = |s: &str| -> Option<(usize, usize)> {
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let (os, oc) = side(old)?;
    let (ns, nc) = side(new)?;
    Some((os, oc, ns, nc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_hunks_get_headers_from_their_lines() {
        let spec = "@@ 3\n a\n-b\n+c\n+d\n e\n@@ 10\n x\n-y\n z\n";
        let f = FilePatch::from_spec("f.txt", spec, "spec").unwrap();
        let text = f.to_text();
        // First hunk: old 3..5 (3 lines), new 3..6 (4 lines); second starts one line later on the new side.
        assert!(text.contains("@@ -3,3 +3,4 @@\n a\n-b\n+c\n+d\n e\n"), "{text}");
        assert!(text.contains("@@ -10,3 +11,2 @@\n x\n-y\n z\n"), "{text}");
        assert_eq!(parse_patch(&text).unwrap(), vec![f]);
    }

    #[test]
    fn spec_errors_name_the_line() {
        let err = FilePatch::from_spec("f", "@@ 3\n a\nb\n", "t.j2").unwrap_err().to_string();
        assert!(err.starts_with("t.j2:3:"), "{err}");
        let err = FilePatch::from_spec("f", "@@ 5\n a\n-b\n a\n@@ 6\n c\n-d\n c\n", "t.j2").unwrap_err().to_string();
        assert!(err.contains("overlap"), "{err}");
        assert!(FilePatch::from_spec("f", " a\n", "t.j2").is_err());
        let err = FilePatch::from_spec("f", "@@ 5\n a\n b\n+c\n d\n", "t.j2").unwrap_err().to_string();
        assert!(err.contains("2 leading and 1 trailing"), "{err}");
    }

    #[test]
    fn parser_rejects_wrong_counts() {
        let text = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
        assert!(parse_patch(text).is_ok());
        let bad = text.replace("-1,2 +1,2", "-1,3 +1,2");
        assert!(parse_patch(&bad).unwrap_err().to_string().contains("hunk ends before its counts"));
        let bad = "diff --git a/f b/f\n--- a/g\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(parse_patch(bad).is_err());
        assert!(parse_patch("hello\n").is_err());
    }
}
