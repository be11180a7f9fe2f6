//! Comparison: AITER tuned-lookup padding, nearest-M lookup, speed-up arithmetic, fallbacks, the
//! published rule, and the text/CSV/SVG/PNG outputs.

use std::path::Path;

use gemm_synth::app::shared::published_rule;
use synth_core::catalog::{Candidate, Catalog};
use synth_core::compare::report::{self, LayerNames};
use synth_core::compare::{
    evaluate, pad_coarse, pad_fine, plot, raster, LookupKind, Policy, Status, TunedEntry, TunedTable,
};
use synth_core::rule::{CmpOp, Cond, Expr, Leaf, Node, Rule, Var};
use synth_core::table::{read_aiter_csv, Cell, LatencyMatrix, Shape};

fn entry(id: i32, sk: u32) -> TunedEntry {
    TunedEntry { candidate: Candidate::new(id, sk), legacy: true }
}

#[test]
fn fine_padding() {
    for (m, want) in [
        (1, 16),
        (16, 16),
        (17, 32),
        (255, 256),
        (256, 256),
        (257, 288),
        (1000, 1024),
        (1024, 1024),
        (1025, 1088),
        (4096, 4096),
        (4097, 4224),
        (8193, 8320),
    ] {
        assert_eq!(pad_fine(m), want, "M={m}");
    }
}

#[test]
fn coarse_padding() {
    for (m, n, want) in [
        (0, 5120, 1),
        (1, 5120, 1),
        (3, 5120, 4),
        (100, 5120, 128),
        (8192, 8192, 8192),
        (9000, 5120, 8192),
        (9000, 4096, 16384),
        (8193, 4097, 8192),
        (5000, 25600, 8192),
    ] {
        assert_eq!(pad_coarse(m, n), want, "M={m} N={n}");
    }
}

#[test]
fn aiter_lookup_order() {
    let mut t = TunedTable::new("hand");
    for (m, id) in [(16, 8), (64, 18), (128, 3), (8192, 0)] {
        t.insert(Shape::new(m, 5120, 5120), entry(id, 0));
    }
    let look = |m, n| t.lookup_aiter(m, n, 5120).map(|(e, k)| (e.candidate.kernel_id, k));
    assert_eq!(look(16, 5120), Some((8, LookupKind::Exact)));
    assert_eq!(look(3, 5120), Some((8, LookupKind::Fine))); // 3 → 16
    assert_eq!(look(50, 5120), Some((18, LookupKind::Fine))); // 50 → 64
    assert_eq!(look(100, 5120), Some((3, LookupKind::Coarse))); // fine 112 absent, coarse 128
    assert_eq!(look(20, 5120), None); // fine 32 and coarse 32 absent → default
    assert_eq!(look(9000, 5120), Some((0, LookupKind::Coarse))); // fine 9088 absent, coarse 8192
    assert_eq!(look(16, 4096), None); // another layer
}

#[test]
fn nearest_m_lookup_prefers_the_smaller_m_on_ties() {
    let mut t = TunedTable::new("hand");
    for (m, id) in [(16, 8), (64, 18), (8192, 0)] {
        t.insert(Shape::new(m, 5120, 5120), entry(id, 0));
    }
    t.insert(Shape::new(40, 5120, 4096), entry(5, 1));
    let near = |m, k| t.lookup_nearest(m, 5120, k).map(|(e, tm)| (e.candidate.kernel_id, tm));
    assert_eq!(near(40, 5120), Some((8, 16))); // |40-16| = |40-64| = 24 → the smaller M
    assert_eq!(near(41, 5120), Some((18, 64)));
    assert_eq!(near(1, 5120), Some((8, 16)));
    assert_eq!(near(100_000, 5120), Some((0, 8192)));
    assert_eq!(near(1, 4096), Some((5, 40)));
    assert_eq!(near(1, 12800), None);
}

#[test]
fn aiter_table_from_the_real_mi300x_csv() {
    let catalog = Catalog::embedded();
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("measurements/mi300x/a8w8_blockscale_tuned_gemm_qwen3_vl_32b.csv");
    let rows = read_aiter_csv(&path, &catalog).unwrap();
    let (t, other, replaced) = TunedTable::from_rows(&rows, &catalog, Some(("gfx942", 304)), "mi300x");
    assert_eq!((t.len(), other, replaced), (8172, 0, 0));
    let id = |m| t.lookup_aiter(m, 5120, 5120).map(|(e, k)| (e.candidate.kernel_id, k));
    // Rows of the file: M=16 → #8, 64 → #18, 256 → #3, 288 → #2.
    assert_eq!(id(16), Some((8, LookupKind::Exact)));
    assert_eq!(id(5), Some((8, LookupKind::Fine)));
    assert_eq!(id(50), Some((18, LookupKind::Fine)));
    assert_eq!(id(250), Some((3, LookupKind::Fine)));
    assert_eq!(id(270), Some((2, LookupKind::Fine)));
    // Nearest M: 56 is 8 from both 48 (#8) and 64 (#18) → 48.
    assert_eq!(t.lookup_nearest(56, 5120, 5120).map(|(e, m)| (e.candidate.kernel_id, m)), Some((8, 48)));
    assert_eq!(t.lookup_nearest(57, 5120, 5120).map(|(e, m)| (e.candidate.kernel_id, m)), Some((18, 64)));
    // Another device: nothing applies.
    let (t, other, _) = TunedTable::from_rows(&rows, &catalog, Some(("gfx950", 256)), "mi300x");
    assert!(t.is_empty());
    assert_eq!(other, 8172);
    // Any device: every row; a repeated shape replaces the earlier row and is counted.
    let mut twice = rows[..2].to_vec();
    twice.push(rows[0].clone());
    let (t, other, replaced) = TunedTable::from_rows(&twice, &catalog, None, "mi300x");
    assert_eq!((t.len(), other, replaced), (2, 0, 1));
}

/// Two shapes × three candidates (#7 default, #8, #14):
///
/// | shape          | #7  | #8       | #14     |
/// |----------------|-----|----------|---------|
/// | 16×5120×5120   | 40  | 10       | 20      |
/// | 4096×5120×5120 | 300 | missing  | 100     |
fn tiny() -> LatencyMatrix {
    let shapes = vec![Shape::new(16, 5120, 5120), Shape::new(4096, 5120, 5120)];
    let cands = vec![Candidate::new(7, 0), Candidate::new(8, 0), Candidate::new(14, 0)];
    let mut m = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
    for (s, row) in [[Some(40.0), Some(10.0), Some(20.0)], [Some(300.0), None, Some(100.0)]].iter().enumerate() {
        for (c, t) in row.iter().enumerate() {
            m.set(s, c, t.map_or(Cell::Missing, Cell::Ok));
        }
    }
    m
}

fn const_rule(id: i32) -> Rule {
    Rule { root: Node::Leaf(Leaf::new(id, 0)), note: None }
}

#[test]
fn speedups_and_geomeans() {
    let m = tiny();
    let catalog = Catalog::embedded();
    let mut tuned = TunedTable::new("hand");
    tuned.insert(Shape::new(16, 5120, 5120), entry(14, 0)); // tuned picks #14 at M=16; M=4096 → coarse 4096 absent → default
    let policies = vec![
        Policy::Default,
        Policy::Tuned { name: "tuned".into(), table: tuned },
        Policy::Rule { name: "always8".into(), rule: const_rule(8) },
        Policy::Oracle,
    ];
    let r = evaluate(&m, &catalog, &policies, &[0, 1]);
    assert_eq!(r.default_us, vec![40.0, 300.0]);
    assert_eq!(r.oracle_us, vec![10.0, 100.0]);
    let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-12, "{a} vs {b}");

    // Default: 340 us; of oracle = sqrt(10/40 · 100/300).
    let d = &r.policies[0].summary;
    close(d.total_us, 340.0);
    close(d.total_vs_default, 1.0);
    close(d.of_oracle, (0.25f64 * (1.0 / 3.0)).sqrt());
    // Tuned: 20 + 300 = 320.
    let t = &r.policies[1].summary;
    close(t.total_us, 320.0);
    close(t.total_vs_default, 340.0 / 320.0);
    close(t.geomean_vs_default, (2.0f64 * 1.0).sqrt());
    assert_eq!(t.lookups.get(&LookupKind::Exact), Some(&1));
    assert_eq!(t.lookups.get(&LookupKind::Default), Some(&1));
    // Always #8: 10 on M=16; Missing on M=4096 → charged the default's 300, counted.
    let a = &r.policies[2];
    assert_eq!(a.outcomes[1].status, Status::Missing);
    close(a.outcomes[1].us, 300.0);
    close(a.summary.total_us, 310.0);
    assert_eq!((a.summary.missing, a.summary.invalid), (1, 0));
    close(a.summary.total_vs_tuned.unwrap(), 320.0 / 310.0);
    close(a.summary.geomean_vs_default, (4.0f64 * 1.0).sqrt());
    close(a.summary.geomean_vs_tuned.unwrap(), (2.0f64 * 1.0).sqrt());
    // Oracle: 110 us, of oracle 1.
    let o = &r.policies[3].summary;
    close(o.total_us, 110.0);
    close(o.of_oracle, 1.0);
    close(o.total_vs_default, 340.0 / 110.0);
    close(o.geomean_vs_default, (4.0f64 * 3.0).sqrt());
    assert_eq!(o.picks.get(&Candidate::new(8, 0)), Some(&1));
    assert_eq!(o.picks.get(&Candidate::new(14, 0)), Some(&1));
}

#[test]
fn invalid_default_and_unscorable_shapes() {
    let mut m = tiny();
    m.set(1, 0, Cell::Invalid("run failed: oom".into())); // default unusable on M=4096
    let mut m3 = LatencyMatrix::new(
        "gfx942",
        304,
        None,
        vec![m.shapes[0], m.shapes[1], Shape::new(64, 5120, 5120)],
        m.candidates.clone(),
    );
    for s in 0..2 {
        for c in 0..3 {
            m3.set(s, c, m.cell(s, c).clone());
        }
    }
    let catalog = Catalog::embedded();
    let r = evaluate(
        &m3,
        &catalog,
        &[Policy::Default, Policy::Rule { name: "r".into(), rule: const_rule(14) }],
        &[0, 1, 2],
    );
    // M=64 has no usable cell: left out.
    assert_eq!(r.unscorable, vec![Shape::new(64, 5120, 5120)]);
    assert_eq!(r.shapes, vec![0, 1]);
    // The default is invalid on M=4096: charged the slowest usable time there (100, the only one).
    assert_eq!(r.policies[0].outcomes[1].status, Status::Invalid);
    assert_eq!(r.default_us, vec![40.0, 100.0]);
    assert_eq!(r.default_unusable, 1);
    assert_eq!(r.policies[0].summary.invalid, 1);
    assert!(report::table(&r, &LayerNames::new()).contains("not usable on 1 of the shapes"));
}

#[test]
fn published_rule_picks_and_scores() {
    let catalog = Catalog::embedded();
    let rule = published_rule(&catalog).unwrap();
    // Branches: M<=128 && N>=4096 → 256x16x64x256 (#8); 128<M<=512 && N>=4096 → 256x32x256x128 (#9);
    // M>=512 && N>=512 && K>=1024 → 256x128x128x128 v3 (#0); ...; else 256x128x64x128 v3 (#1).
    let shapes = vec![
        Shape::new(1, 5120, 5120),
        Shape::new(200, 5120, 5120),
        Shape::new(600, 5120, 5120),
        Shape::new(300, 256, 256),
    ];
    let want = [8, 9, 0, 1];
    for (s, w) in shapes.iter().zip(want) {
        assert_eq!(rule.eval(s.m, s.n, s.k), Leaf::new(w, 0), "{s}");
    }
    let cands: Vec<Candidate> = [0, 1, 7, 8, 9].iter().map(|&i| Candidate::new(i, 0)).collect();
    let mut m = LatencyMatrix::new("gfx942", 304, None, shapes.clone(), cands);
    // Default (#7) takes 100 everywhere; the published rule's pick takes 50, everything else 80.
    for (s, &best) in want.iter().enumerate() {
        for c in 0..5 {
            let id = m.candidates[c].kernel_id;
            let t = if id == 7 {
                100.0
            } else if id == best {
                50.0
            } else {
                80.0
            };
            m.set(s, c, Cell::Ok(t));
        }
    }
    let r = evaluate(&m, &catalog, &[Policy::Default, Policy::Rule { name: "published".into(), rule }], &[0, 1, 2, 3]);
    let s = &r.policies[1].summary;
    assert!((s.total_vs_default - 2.0).abs() < 1e-12);
    assert!((s.geomean_vs_default - 2.0).abs() < 1e-12);
    assert!((s.of_oracle - 1.0).abs() < 1e-12);
    assert_eq!(s.picks.len(), 4);
}

#[test]
fn rule_with_split_k_is_scored_on_its_split_k_column() {
    let shapes = vec![Shape::new(16, 5120, 12800)];
    let cands = vec![Candidate::new(7, 0), Candidate::new(8, 0), Candidate::new(8, 2)];
    let mut m = LatencyMatrix::new("gfx942", 304, None, shapes, cands);
    for (c, t) in [60.0, 40.0, 20.0].iter().enumerate() {
        m.set(0, c, Cell::Ok(*t));
    }
    let rule = Rule {
        root: Node::Chain {
            branches: vec![(Cond::cmp(CmpOp::Le, Expr::Var(Var::M), Expr::Lit(64)), Node::Leaf(Leaf::new(8, 2)))],
            otherwise: Box::new(Node::Leaf(Leaf::new(8, 0))),
        },
        note: None,
    };
    let r = evaluate(&m, &Catalog::embedded(), &[Policy::Rule { name: "sk".into(), rule }], &[0]);
    assert_eq!(r.policies[0].outcomes[0].us, 20.0);
    assert!((r.policies[0].summary.geomean_vs_default - 3.0).abs() < 1e-12);
}

#[test]
fn text_csv_and_svg_outputs() {
    let m = tiny();
    let catalog = Catalog::embedded();
    let mut tuned = TunedTable::new("hand");
    tuned.insert(Shape::new(16, 5120, 5120), entry(14, 0));
    let policies = vec![Policy::Default, Policy::Tuned { name: "tuned".into(), table: tuned }, Policy::Oracle];
    let r = evaluate(&m, &catalog, &policies, &[0, 1]);
    let mut names = LayerNames::new();
    names.insert((5120, 5120), "qkv_proj".into());

    let csv = report::csv(&r, &names);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], report::CSV_COLUMNS);
    assert_eq!(lines.len(), 1 + 2 * 3);
    // Tuned on M=16: #14 (20 us) exact; default 40, tuned 20, oracle 10.
    assert_eq!(
        lines[2],
        "qkv_proj,16,5120,5120,tuned,14,0,exact,ok,20.0000,40.0000,20.0000,10.0000,2.0000,1.0000,0.5000"
    );
    assert_eq!(
        lines[6],
        "qkv_proj,4096,5120,5120,oracle,14,0,,ok,100.0000,300.0000,300.0000,100.0000,3.0000,3.0000,1.0000"
    );

    let table = report::table(&r, &names);
    assert!(table.contains("oracle") && table.contains("x tuned (geo)"), "{table}");

    let svg = plot::speedup_svg(&r, &names, "test").unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("qkv_proj") && svg.contains("oracle"));
    assert_eq!(svg, plot::speedup_svg(&r, &names, "test").unwrap());
}

/// A decoded PNG: width, height and 8-bit RGB pixels.
struct Image {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Image {
    fn decode(bytes: &[u8]) -> Image {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().expect("a PNG");
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut rgb).expect("its pixels");
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
        rgb.truncate(info.buffer_size());
        Image { width: info.width, height: info.height, rgb }
    }

    fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.width + x) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Pixels of the rectangle `xs` × `ys` that satisfy `f`.
    fn count(&self, xs: std::ops::Range<u32>, ys: std::ops::Range<u32>, f: impl Fn([u8; 3]) -> bool) -> usize {
        ys.flat_map(|y| xs.clone().map(move |x| (x, y))).filter(|&(x, y)| f(self.pixel(x, y))).count()
    }
}

fn near(p: [u8; 3], c: [u8; 3], tolerance: i32) -> bool {
    p.iter().zip(c).all(|(&a, b)| (i32::from(a) - i32::from(b)).abs() <= tolerance)
}

/// The height the SVG declares.
fn svg_height(svg: &str) -> u32 {
    let tail = &svg[svg.find("height=\"").unwrap() + 8..];
    tail[..tail.find('"').unwrap()].parse().unwrap()
}

#[test]
fn the_plot_png_is_the_svg_drawn_at_twice_its_size_with_its_text() {
    let m = tiny();
    let catalog = Catalog::embedded();
    let mut tuned = TunedTable::new("hand");
    tuned.insert(Shape::new(16, 5120, 5120), entry(14, 0));
    let policies = vec![Policy::Default, Policy::Tuned { name: "tuned".into(), table: tuned }, Policy::Oracle];
    let r = evaluate(&m, &catalog, &policies, &[0, 1]);
    let mut names = LayerNames::new();
    names.insert((5120, 5120), "qkv_proj".into());
    let svg = plot::speedup_svg(&r, &names, "a title to find in the picture").unwrap();
    let bytes = raster::svg_to_png(&svg).unwrap();
    assert_eq!(bytes, raster::svg_to_png(&svg).unwrap(), "two renders of one SVG differ");
    let img = Image::decode(&bytes);
    assert_eq!((img.width, img.height), (2 * plot::WIDTH, 2 * svg_height(&svg)));

    // The title is centred in the top 30 SVG units: ink in the middle, none at the far left and right.
    let ink = |p: [u8; 3]| p.iter().all(|&c| c < 110);
    assert!(img.count(600..1200, 0..60, ink) > 500, "no title text at the top");
    assert_eq!(img.count(0..200, 0..60, ink) + img.count(1600..1800, 0..60, ink), 0);
    // Several colours: white background, black ink (axes, text, the default's crosses), the tuned
    // policy's blue triangles (31, 119, 180), grey grid lines.
    let white = img.count(0..img.width, 0..img.height, |p| p == [255, 255, 255]);
    assert!(white > (img.width * img.height / 2) as usize, "mostly white background");
    assert!(img.count(0..img.width, 0..img.height, |p| near(p, [31, 119, 180], 12)) > 20, "no tuned markers");
    assert!(img.count(0..img.width, 0..img.height, |p| near(p, [0, 0, 0], 10)) > 1000, "no black ink");
    let mut colours: Vec<[u8; 3]> = img.rgb.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(colours.len() > 20, "only {} colours", colours.len());
}

#[test]
fn the_committed_png_is_the_committed_svg_drawn() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated");
    let svg = std::fs::read_to_string(dir.join("speedup.svg")).unwrap();
    let committed = std::fs::read(dir.join("speedup.png")).unwrap();
    let img = Image::decode(&committed);
    assert_eq!((img.width, img.height), (1800, 2 * svg_height(&svg)));
    assert!(raster::svg_to_png(&svg).unwrap() == committed, "generated/speedup.png is not generated/speedup.svg drawn");
}

#[test]
fn compare_writes_the_png_beside_the_svg_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["compare", "--model", "qwen3-32b", "--svg", "cmp.svg"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let real = std::fs::canonicalize(dir.path()).unwrap();
    for name in ["cmp.svg", "cmp.png"] {
        assert!(text.contains(&format!("written: {}", real.join(name).display())), "{name} in:\n{text}");
    }
    let svg = std::fs::read_to_string(dir.path().join("cmp.svg")).unwrap();
    let png = std::fs::read(dir.path().join("cmp.png")).unwrap();
    assert!(raster::svg_to_png(&svg).unwrap() == png, "cmp.png is not cmp.svg drawn");
    assert_eq!(Image::decode(&png).width, 1800);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["compare", "--model", "qwen3-32b", "--svg", "cmp.png"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--svg cmp.png") && err.contains(".png"), "{err}");
}

#[test]
fn control_characters_of_a_rule_file_name_reach_neither_the_plot_nor_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let name = "esc\u{1b}[31mRED.json";
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/rule.json"), dir.path().join(name)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["compare", "--model", "qwen3-32b", "--rule", name, "--svg", "cmp.svg"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(dir.path().join("cmp.svg")).unwrap();
    for (t, shown) in [(&svg, "esc&lt;U+001B&gt;[31mRED.json"), (&text.to_string(), "esc<U+001B>[31mRED.json")] {
        assert!(!t.contains('\u{1b}'), "a raw escape in {t:?}");
        assert!(t.contains(shown), "the name is shown with its code point in {t:?}");
    }
}

#[test]
fn compare_writes_its_files_all_or_nothing() {
    // The PNG's path is a directory: nothing is written (the CSV and SVG once were, before the PNG failed).
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("p.png")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
        .args(["compare", "--csv", "c.csv", "--svg", "p.svg"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("p.png") && err.contains("a directory is in the way"), "{err}");
    let left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec!["p.png".to_string()], "nothing else is written");
}

#[test]
fn several_datasets_are_named_once_from_any_working_directory() {
    // The union of two tables was named by its joined names read back as one path: from a subdirectory the
    // label grew one copy of that directory per reading ("measurements/h100/measurements/h100/..."), from
    // elsewhere the first name took the working directory as its own.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let label = |cwd: &std::path::Path, ck: &str, vendor: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_synth"))
            .args(["compare", "--dataset", ck, "--dataset", vendor, "--model", "qwen3-32b", "--tp", "2"])
            .current_dir(cwd)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        text.lines().next().unwrap().to_string()
    };
    let first = label(&root.join("measurements/h100"), "qwen3-32b-tp2.csv.gz", "vendor-qwen3-32b-tp2.csv");
    assert!(
        first.starts_with(
            "dataset: measurements/h100/qwen3-32b-tp2.csv.gz + measurements/h100/vendor-qwen3-32b-tp2.csv (sm_90"
        ),
        "{first}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(root.join("measurements/h100/qwen3-32b-tp2.csv.gz"), dir.path().join("ck.csv.gz")).unwrap();
    std::fs::copy(root.join("measurements/h100/vendor-qwen3-32b-tp2.csv"), dir.path().join("v.csv")).unwrap();
    let outside = label(dir.path(), "ck.csv.gz", "v.csv");
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let want = format!("dataset: {} + {} (sm_90", real.join("ck.csv.gz").display(), real.join("v.csv").display());
    assert!(outside.starts_with(&want), "{outside}\nwanted {want}");
}
