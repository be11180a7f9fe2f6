//! The GEMM shapes a runtime actually ran without a tuned config, read from its log (or from AITER's untuned
//! CSV): the shapes worth measuring and training on first.
//!
//! One file may mix the formats below (each line is classified on its own); every other line is ignored, as
//! logs are mostly other text. A line that carries a format's marker but cannot be parsed is an error naming
//! the file, the line and the value, never a skip.
//!
//! - **AITER's untuned CSV for the a8w8 blockscale GEMM** (`aiter/configs/a8w8_blockscale_untuned_gemm.csv`,
//!   the `-i` file of `csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py`): the header `M,N,K`, then
//!   one row `M, N, K` per line (spaces around the values allowed). The table runs from its header to the
//!   first blank line or the end of the file, and each of its lines must be such a row; a header with more
//!   columns (`M,N,K,q_dtype_w` is the per-token a8w8 GEMM's) is an error. Gives (M, N, K).
//! - **AITER's message for a shape without a tuned config**, `aiter/ops/gemm_op_a8w8.py` line 488 (AITER
//!   e4048607a5, `get_CKGEMM_config`, which the blockscale GEMMs call), logged at INFO:
//!   `shape is M:{M}, N:{N}, K:{K}, not found tuned config in {tuned_file}, will use default config!`
//!   (after AITER's prefix `[aiter] `, or on its own line under `AITER_LOG_MORE=1`). Gives (M, N, K).
//!   The same marker is printed for other GEMMs, which are counted in [`RuntimeShapes::other_gemm_lines`]
//!   and give no shape: the same text from `aiter/ops/gemm_op_a4w4.py` line 76 (told apart by its tuned file,
//!   whose name holds `a4w4`), the per-token a8w8 GEMMs' `..., K:{K}, q_dtype_w:{q_dtype_w}, not found ...`
//!   (`gemm_op_a8w8.py` line 551), the bf16 GEMM's `..., K:{K} dtype=...` (`aiter/tuned_gemm.py` line 232)
//!   and the batched GEMMs' `shape is B:{B}, M:...` (`aiter/ops/batched_gemm_op_a8w8.py` line 119,
//!   `batched_gemm_op_bf16.py` line 102).
//! - **vLLM's and SGLang's warning for a missing block-FP8 config file**, logged by
//!   `get_w8a8_block_fp8_configs` in vLLM's `vllm/model_executor/layers/quantization/utils/fp8_utils.py`
//!   and SGLang's `python/sglang/srt/layers/quantization/fp8_kernel.py`:
//!   `Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file not found at
//!   {path}`, where the file name of `{path}` is `N={N},K={K},device_name={device},dtype=fp8_w8a8,
//!   block_shape=[{bn},{bk}].json` (SGLang writes `[{bn}, {bk}]`). The message carries no M: it gives the
//!   pair (N, K), listed in [`RuntimeShapes::nk_without_m`] and taken at each of the caller's M values.

use std::path::Path;

use anyhow::Context;

use synth_base::diag::Located;

/// Marker of AITER's message for a shape without a tuned config.
const AITER_MARKER: &str = "not found tuned config in ";
/// Where AITER's message starts.
const AITER_START: &str = "shape is ";
/// Marker of vLLM's and SGLang's warning for a missing block-FP8 config file.
const RUNTIME_MARKER: &str = "Using default W8A8 Block FP8 kernel config";
/// What precedes the config file's path in that warning.
const RUNTIME_PATH: &str = "Config file not found at ";

/// What a runtime log says about the shapes it ran without a tuned config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeShapes {
    /// (M, N, K), sorted and deduplicated: the shapes of AITER's messages and untuned CSV rows, and every pair
    /// of `nk_without_m` at every M the caller gave.
    pub shapes: Vec<(u32, u32, u32)>,
    /// (N, K) of vLLM's and SGLang's warnings, sorted and deduplicated (their messages carry no M).
    pub nk_without_m: Vec<(u32, u32)>,
    /// 1-based lines of AITER's message for a shape of another GEMM (a4w4, per-token a8w8, bf16, batched):
    /// no shape of the a8w8 blockscale GEMM, left out of `shapes`.
    pub other_gemm_lines: Vec<usize>,
}

/// The shapes of the runtime log or untuned CSV at `path` (plain or gzip-compressed, capped at
/// [`synth_base::input::MAX_TABLE_BYTES`]); each (N, K) of a message without M is taken at every M of `m_values`
/// (none: the pairs are only listed in [`RuntimeShapes::nk_without_m`]). An M of 0 is an error.
pub fn shapes_from_log(path: &Path, m_values: &[u32]) -> anyhow::Result<RuntimeShapes> {
    if m_values.contains(&0) {
        anyhow::bail!("M values must be positive, got 0");
    }
    let bytes = synth_base::input::read_table_capped(path, synth_base::input::MAX_TABLE_BYTES, "runtime log")
        .with_context(|| format!("cannot read the runtime log {}", path.display()))?;
    Ok(parse(&bytes, &path.display().to_string(), m_values)?)
}

/// One recognized line.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Shape(u32, u32, u32),
    Nk(u32, u32),
    OtherGemm,
    /// The untuned CSV's header: a table starts.
    Header,
    Nothing,
}

/// The shapes of `bytes` (the contents of `file`), as [`shapes_from_log`].
fn parse(bytes: &[u8], file: &str, m_values: &[u32]) -> Result<RuntimeShapes, Located> {
    let mut out = RuntimeShapes::default();
    let mut nks = Vec::new();
    // The line of the untuned CSV's header while its table runs.
    let mut table: Option<usize> = None;
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let lineno = i + 1;
        let text = String::from_utf8_lossy(raw);
        let line = text.strip_suffix('\r').unwrap_or(&text);
        let line = if lineno == 1 { line.strip_prefix('\u{feff}').unwrap_or(line) } else { line };
        let found = match table {
            Some(header) if !is_message(line) && header_columns(line).is_none() => match line.trim() {
                "" => {
                    table = None;
                    Found::Nothing
                }
                row => csv_row(row, header).map_err(|e| Located { file: file.to_string(), ..e }.line(lineno))?,
            },
            _ => classify(line).map_err(|message| Located::new(file, message).line(lineno))?,
        };
        match found {
            Found::Shape(m, n, k) => out.shapes.push((m, n, k)),
            Found::Nk(n, k) => nks.push((n, k)),
            Found::OtherGemm => out.other_gemm_lines.push(lineno),
            Found::Header => table = Some(lineno),
            Found::Nothing => {}
        }
        if is_message(line) {
            table = None;
        }
    }
    nks.sort_unstable();
    nks.dedup();
    out.shapes.extend(nks.iter().flat_map(|&(n, k)| m_values.iter().map(move |&m| (m, n, k))));
    out.shapes.sort_unstable();
    out.shapes.dedup();
    out.nk_without_m = nks;
    Ok(out)
}

/// Whether `line` carries the marker of AITER's or the runtimes' message.
fn is_message(line: &str) -> bool {
    line.contains(AITER_MARKER) || line.contains(RUNTIME_MARKER)
}

/// The columns of `line` when it reads as a CSV header (`M, N, K` with any spaces), else `None`.
fn header_columns(line: &str) -> Option<Vec<&str>> {
    let cols: Vec<&str> = line.trim().split(',').map(str::trim).collect();
    cols.starts_with(&["M", "N", "K"]).then_some(cols)
}

/// `text` for an error message: at most [`SHOWN_CHARS`] characters of it, then `...` where it was longer.
fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{:?}...", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// How much of a line an error message quotes.
const SHOWN_CHARS: usize = 200;

/// A line outside a table: a message, a header, or nothing.
fn classify(line: &str) -> Result<Found, String> {
    if let Some(at) = line.find(AITER_MARKER) {
        return aiter_message(line, at);
    }
    if let Some(at) = line.find(RUNTIME_MARKER) {
        return runtime_warning(&line[at..]);
    }
    match header_columns(line) {
        Some(cols) if cols.len() == 3 => Ok(Found::Header),
        Some(cols) => Err(format!(
            "an untuned CSV header with the columns {:?}: the a8w8 blockscale GEMM's untuned CSV has exactly \
             M,N,K (this one is another GEMM's)",
            cols.join(",")
        )),
        None => Ok(Found::Nothing),
    }
}

/// A row of the untuned CSV whose header is at line `header`.
fn csv_row(row: &str, header: usize) -> Result<Found, Located> {
    let fields: Vec<&str> = row.split(',').map(str::trim).collect();
    if fields.len() != 3 {
        return Err(Located::new(
            "",
            format!(
                "an untuned CSV row (the header M,N,K is at line {header}) needs 3 values, got {}: {}",
                fields.len(),
                shown(row)
            ),
        )
        .hint("end the table with a blank line before other text"));
    }
    let mut dims = [0u32; 3];
    for ((dim, name), value) in dims.iter_mut().zip(["M", "N", "K"]).zip(&fields) {
        *dim = positive(value)
            .ok_or_else(|| Located::new("", "expected a positive 32-bit integer").column(name).value(*value))?;
    }
    Ok(Found::Shape(dims[0], dims[1], dims[2]))
}

/// A positive `u32` written in decimal digits only.
fn positive(value: &str) -> Option<u32> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok().filter(|&v| v > 0)
}

/// A dimension `name` of a message: `value` as a positive `u32`, else the error naming both.
fn dim(what: &str, name: &str, value: &str) -> Result<u32, String> {
    positive(value).ok_or_else(|| format!("{what}: {name} = {value:?} is not a positive 32-bit integer"))
}

const AITER_WHAT: &str = "AITER's message for a shape without a tuned config";

/// AITER's message, whose marker [`AITER_MARKER`] starts at byte `at` of `line`.
fn aiter_message(line: &str, at: usize) -> Result<Found, String> {
    let expected = || {
        format!(
            "{AITER_WHAT}: expected \"shape is M:<M>, N:<N>, K:<K>, not found tuned config in <file>, ...\", \
             got {}",
            shown(line)
        )
    };
    let start = line[..at].rfind(AITER_START).ok_or_else(expected)?;
    let fields = line[start + AITER_START.len()..at].trim_end().strip_suffix(',').ok_or_else(expected)?;
    let fields: Vec<&str> = fields.split(',').map(str::trim).collect();
    let tuned_file = line[at + AITER_MARKER.len()..].split(", will use").next().unwrap_or("");
    let name = tuned_file.trim().rsplit('/').next().unwrap_or("");
    let other = fields[0].starts_with("B:")
        || fields.get(3).is_some_and(|f| f.starts_with("q_dtype_w:"))
        || fields.get(2).is_some_and(|f| f.contains(" dtype="))
        || (fields.len() == 3 && name.contains("a4w4"));
    if other {
        return Ok(Found::OtherGemm);
    }
    if fields.len() != 3 {
        return Err(expected());
    }
    let mut dims = [0u32; 3];
    for ((d, want), field) in dims.iter_mut().zip(["M", "N", "K"]).zip(&fields) {
        let value = field.strip_prefix(want).and_then(|v| v.strip_prefix(':')).ok_or_else(expected)?;
        *d = dim(AITER_WHAT, want, value.trim())?;
    }
    Ok(Found::Shape(dims[0], dims[1], dims[2]))
}

const RUNTIME_WHAT: &str = "the block-FP8 warning of vLLM or SGLang";

/// vLLM's or SGLang's warning, `text` starting at its marker.
fn runtime_warning(text: &str) -> Result<Found, String> {
    let expected = || {
        format!(
            "{RUNTIME_WHAT}: expected \"... Config file not found at <dir>/N=<N>,K=<K>,device_name=...\", \
             got {}",
            shown(text)
        )
    };
    let path = text.split_once(RUNTIME_PATH).map(|(_, p)| p.trim()).ok_or_else(expected)?;
    let name = path.rsplit('/').next().unwrap_or(path);
    let mut parts = name.splitn(3, ',');
    let mut take = |want: &str| -> Result<u32, String> {
        let part = parts.next().unwrap_or("");
        let value = part.strip_prefix(want).and_then(|v| v.strip_prefix('=')).ok_or_else(expected)?;
        dim(RUNTIME_WHAT, want, value)
    };
    let n = take("N")?;
    let k = take("K")?;
    if parts.next().is_none() {
        return Err(expected());
    }
    Ok(Found::Nk(n, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str, ms: &[u32]) -> Result<RuntimeShapes, String> {
        parse(text.as_bytes(), "run.log", ms).map_err(|e| e.to_string())
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("tests/data/runtime-logs").join(name)
    }

    fn read(name: &str, ms: &[u32]) -> RuntimeShapes {
        shapes_from_log(&fixture(name), ms).unwrap()
    }

    fn fixture_error(name: &str) -> String {
        format!("{:#}", shapes_from_log(&fixture(name), &[]).unwrap_err())
    }

    #[test]
    fn aiter_untuned_csv_rows_sorted_and_deduplicated() {
        let got = read("aiter-untuned.csv", &[1, 2]);
        assert_eq!(got.shapes, [(1, 256, 7168), (16, 576, 7168), (16, 1536, 7168), (32, 7168, 2304)]);
        assert!(got.nk_without_m.is_empty() && got.other_gemm_lines.is_empty());
    }

    #[test]
    fn aiter_messages_of_the_blockscale_gemm_and_the_others_apart() {
        let got = read("aiter.log", &[]);
        // lines 2 and 4 (one shape twice), 3 (the bpreshuffle tuned file) and 11 (under AITER_LOG_MORE)
        assert_eq!(got.shapes, [(1, 576, 7168), (8, 4608, 7168), (64, 7168, 2048)]);
        // q_dtype_w (per-token a8w8), an a4w4 tuned file, bf16, batched
        assert_eq!(got.other_gemm_lines, [6, 7, 8, 9]);
        assert!(got.nk_without_m.is_empty());
    }

    #[test]
    fn vllm_warnings_give_nk_pairs_taken_at_the_given_m() {
        let got = read("vllm.log", &[64, 1, 64]);
        assert_eq!(got.nk_without_m, [(5120, 8192), (16384, 5120)]);
        assert_eq!(got.shapes, [(1, 5120, 8192), (1, 16384, 5120), (64, 5120, 8192), (64, 16384, 5120)]);
        let bare = read("vllm.log", &[]);
        assert_eq!(bare.nk_without_m, got.nk_without_m);
        assert!(bare.shapes.is_empty());
    }

    #[test]
    fn sglang_warnings_with_the_spaced_block_shape_and_not_the_moe_warning() {
        let got = read("sglang.log", &[16]);
        assert_eq!(got.nk_without_m, [(5120, 8192), (10240, 5120)]);
        assert_eq!(got.shapes, [(16, 5120, 8192), (16, 10240, 5120)]);
        assert!(got.other_gemm_lines.is_empty());
    }

    #[test]
    fn crlf_file_mixing_every_format() {
        let bytes = std::fs::read(fixture("mixed-crlf.log")).unwrap();
        assert!(bytes.windows(2).any(|w| w == b"\r\n"), "the fixture must keep its CRLF line ends");
        let got = read("mixed-crlf.log", &[256, 32]);
        assert_eq!(got.nk_without_m, [(2112, 7168)]);
        // AITER's (256, 2112, 7168) and the warning's pair at M = 256 are one shape
        assert_eq!(got.shapes, [(32, 2112, 7168), (128, 7168, 2048), (256, 2112, 7168)]);
    }

    #[test]
    fn empty_file_gives_nothing() {
        assert_eq!(read("empty.log", &[1]), RuntimeShapes::default());
        assert_eq!(parse_text("\n\r\n", &[1]).unwrap(), RuntimeShapes::default());
    }

    #[test]
    fn malformed_message_names_file_line_and_value() {
        let e = fixture_error("malformed.log");
        assert!(e.ends_with("malformed.log:2: AITER's message for a shape without a tuned config: N = \"abc\" is not a positive 32-bit integer"), "{e}");
    }

    #[test]
    fn malformed_lines_of_each_format_are_errors() {
        let aiter = "shape is M:{m}, N:7168, K:2048, not found tuned config in /c/a8w8_blockscale_tuned_gemm.csv, will use default config!";
        let e = parse_text(&format!("x\n{}", aiter.replace("{m}", "0")), &[]).unwrap_err();
        assert!(e.starts_with("run.log:2: AITER's message") && e.contains("M = \"0\""), "{e}");
        let e = parse_text(&aiter.replace("{m}", "4294967296"), &[]).unwrap_err();
        assert!(e.starts_with("run.log:1: ") && e.contains("M = \"4294967296\""), "{e}");
        let e = parse_text("[aiter] not found tuned config in x.csv, will use default config!", &[]).unwrap_err();
        assert!(e.starts_with("run.log:1: AITER's message for a shape without a tuned config: expected"), "{e}");
        let e = parse_text(&aiter.replace("M:{m}, ", ""), &[]).unwrap_err();
        assert!(e.starts_with("run.log:1: AITER's message") && e.contains("expected"), "{e}");

        let vllm = "WARNING [fp8_utils.py:851] Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file not found at /c/N={n},K=7168,device_name=X,dtype=fp8_w8a8,block_shape=[128,128].json";
        let e = parse_text(&format!("a\nb\n{}", vllm.replace("{n}", "-1")), &[]).unwrap_err();
        assert_eq!(
            e,
            "run.log:3: the block-FP8 warning of vLLM or SGLang: N = \"-1\" is not a positive 32-bit integer"
        );
        let cut = "Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal!";
        let e = parse_text(cut, &[]).unwrap_err();
        assert!(e.starts_with("run.log:1: the block-FP8 warning of vLLM or SGLang: expected"), "{e}");
        let e = parse_text(&vllm.replace("N={n},K=7168", "K=7168,N=2048"), &[]).unwrap_err();
        assert!(e.contains("expected"), "{e}");
        let e = parse_text(
            &vllm.replace("N={n},K=7168,device_name=X,dtype=fp8_w8a8,block_shape=[128,128]", "N=1,K=2"),
            &[],
        )
        .unwrap_err();
        assert!(e.ends_with("K = \"2.json\" is not a positive 32-bit integer"), "{e}");
    }

    #[test]
    fn untuned_table_rows_are_checked_until_a_blank_line() {
        let e = parse_text("M,N,K\n16, 1536, 7168\n16, x, 7168\n", &[]).unwrap_err();
        assert_eq!(e, "run.log:3: column N = \"x\": expected a positive 32-bit integer");
        let e = parse_text("log\nM,N,K\r\n16, 1536\r\n", &[]).unwrap_err();
        assert!(
            e.starts_with("run.log:3: an untuned CSV row (the header M,N,K is at line 2) needs 3 values, got 2"),
            "{e}"
        );
        let e = parse_text("M,N,K\n1,2,3\nINFO the server is up\n", &[]).unwrap_err();
        assert!(
            e.starts_with("run.log:3: ") && e.ends_with("end the table with a blank line before other text"),
            "{e}"
        );
        // a blank line ends the table: later text and number triples are other text
        let got = parse_text("\u{feff}M,N,K\n1,2,3\n\nINFO up\n4,5,6\n", &[]).unwrap();
        assert_eq!(got.shapes, [(1, 2, 3)]);
        // a repeated header (files joined) and a message line inside a table are read as such
        let msg = "[aiter] shape is M:9, N:8, K:7, not found tuned config in a8w8_blockscale_tuned_gemm.csv, will use default config!";
        let got = parse_text(&format!("M,N,K\n1,2,3\n M , N , K \n4,5,6\n{msg}\n"), &[]).unwrap();
        assert_eq!(got.shapes, [(1, 2, 3), (4, 5, 6), (9, 8, 7)]);
        let e = parse_text("M,N,K,q_dtype_w\n1,2,3,torch.int8\n", &[]).unwrap_err();
        assert!(e.starts_with("run.log:1: an untuned CSV header with the columns \"M,N,K,q_dtype_w\""), "{e}");
        let e = parse_text("M,N,K\n1,2,3\nM,N,K,q_dtype_w\n", &[]).unwrap_err();
        assert!(e.starts_with("run.log:3: an untuned CSV header with the columns"), "{e}");
    }

    #[test]
    fn errors_quote_at_most_200_characters_of_a_line() {
        let long = format!("not found tuned config in {}", "é".repeat(5000));
        let e = parse_text(&long, &[]).unwrap_err();
        let quoted = format!("{:?}...", &long[..long.char_indices().nth(200).unwrap().0]);
        assert!(e.ends_with(&format!("got {quoted}")), "{e}");
    }

    #[test]
    fn unrelated_lines_are_ignored() {
        let text = "1,2,3\nshape is M:1, N:2, K:3, found padded_M: 1, N:2, K:3 is tuned\nM,N\nUsing default W8A8 Block INT8 kernel config. Performance might be sub-optimal! Config file not found at /c/N=1,K=2,x.json\n";
        assert_eq!(parse_text(text, &[1]).unwrap(), RuntimeShapes::default());
    }

    #[test]
    fn zero_m_values_and_unreadable_files_are_errors() {
        let e = shapes_from_log(&fixture("vllm.log"), &[1, 0]).unwrap_err().to_string();
        assert_eq!(e, "M values must be positive, got 0");
        let e = format!("{:#}", shapes_from_log(&fixture("missing.log"), &[]).unwrap_err());
        assert!(e.starts_with("cannot read the runtime log ") && e.contains("missing.log"), "{e}");
    }

    #[test]
    fn gzip_logs_read_as_their_text() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let gz = dir.path().join("vllm.log.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&std::fs::read(fixture("vllm.log")).unwrap()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(shapes_from_log(&gz, &[8]).unwrap(), read("vllm.log", &[8]));
    }
}
