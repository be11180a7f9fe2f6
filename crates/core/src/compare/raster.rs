//! PNG of a plot's SVG, for viewers that do not render SVG. The SVG is the one source of the picture:
//! it is rasterized with resvg at [`SCALE`] pixels per SVG unit (the 900-unit-wide plot becomes 1800 px
//! wide) onto white and encoded by the `png` crate as 8-bit RGB with nothing but the image chunks (no
//! time, text or gamma chunks). Text is drawn with the bundled DejaVu Sans (`assets/fonts/`, its licence
//! beside it), the only font the renderer knows: every font family the SVG names, generic or not,
//! resolves to it and no system font is ever loaded, so the PNG is a function of the SVG alone — the
//! same bytes on every machine of a target, whichever fonts it has.

use std::sync::{Arc, OnceLock};

use anyhow::Context;
use resvg::tiny_skia;
use resvg::usvg::{self, fontdb};

/// Pixels per SVG unit.
pub const SCALE: f32 = 2.0;
/// The most pixels a PNG gets; a larger SVG is drawn at a smaller scale (so a plot of very many panels
/// stays within memory) — still a function of the SVG alone.
pub const MAX_PIXELS: u64 = 48_000_000;

/// The bundled font (DejaVu Sans 2.37; licence in `assets/fonts/LICENSE`).
const FONT: &[u8] =
    include_bytes!(concat!(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."), "/assets/fonts/DejaVuSans.ttf"));
/// Its family name, as the font declares it.
pub const FONT_FAMILY: &str = "DejaVu Sans";

/// The font database: the bundled font alone, every generic family mapped to it.
fn fonts() -> Arc<fontdb::Database> {
    static DB: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = fontdb::Database::new();
        db.load_font_source(fontdb::Source::Binary(Arc::new(FONT)));
        db.set_serif_family(FONT_FAMILY);
        db.set_sans_serif_family(FONT_FAMILY);
        db.set_monospace_family(FONT_FAMILY);
        db.set_cursive_family(FONT_FAMILY);
        db.set_fantasy_family(FONT_FAMILY);
        Arc::new(db)
    })
    .clone()
}

/// The pixel size `svg` is drawn at and the scale that gives it: [`SCALE`], or less when that would
/// exceed [`MAX_PIXELS`].
fn pixel_size(width: f32, height: f32) -> (u32, u32, f32) {
    let area = f64::from(width) * f64::from(height) * f64::from(SCALE) * f64::from(SCALE);
    let scale =
        if area > MAX_PIXELS as f64 { (f64::from(SCALE) * (MAX_PIXELS as f64 / area).sqrt()) as f32 } else { SCALE };
    let px = |v: f32| ((v * scale).round() as u32).max(1);
    (px(width), px(height), scale)
}

/// The PNG of `svg` (see the module docs).
pub fn svg_to_png(svg: &str) -> anyhow::Result<Vec<u8>> {
    let opt = usvg::Options { font_family: FONT_FAMILY.to_string(), fontdb: fonts(), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &opt).context("cannot read the plot's SVG to draw its PNG")?;
    let size = tree.size();
    let (w, h, scale) = pixel_size(size.width(), size.height());
    let mut pixmap =
        tiny_skia::Pixmap::new(w, h).with_context(|| format!("cannot allocate a {w}×{h} pixel image for the PNG"))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::from_scale(scale, scale), &mut pixmap.as_mut());
    // Drawn onto opaque white, every pixel is opaque, so its premultiplied colour is its colour.
    let rgb: Vec<u8> = pixmap.data().chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::High);
        let mut writer = encoder.write_header().context("cannot encode the PNG")?;
        writer.write_image_data(&rgb).context("cannot encode the PNG")?;
        writer.finish().context("cannot encode the PNG")?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a PNG: (width, height, RGB rows).
    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn dark_pixels(rgb: &[u8], width: u32, rows: std::ops::Range<u32>, cols: std::ops::Range<u32>) -> usize {
        rows.flat_map(|y| cols.clone().map(move |x| ((y * width + x) * 3) as usize))
            .filter(|&i| rgb[i..i + 3].iter().all(|&c| c < 96))
            .count()
    }

    const SVG: &str = r##"<svg width="200" height="100" viewBox="0 0 200 100" xmlns="http://www.w3.org/2000/svg">
<rect x="0" y="0" width="200" height="100" fill="#FFFFFF"/>
<text x="10" y="5" dy="0.76em" font-family="sans-serif" font-size="20" fill="#000000">Title</text>
<text x="10" y="60" dy="0.76em" font-family="No Such Font" font-size="20" fill="#000000">M</text>
<rect x="150" y="50" width="20" height="20" fill="#D62728"/>
</svg>"##;

    #[test]
    fn text_and_shapes_are_drawn_at_twice_the_size_with_the_bundled_font_only() {
        let png = svg_to_png(SVG).unwrap();
        let (w, h, rgb) = decode(&png);
        assert_eq!((w, h), (400, 200));
        // The title (SVG y 5..25, x 10..70) is dark ink; the empty band below it (SVG y 30..55) is white.
        assert!(dark_pixels(&rgb, w, 10..50, 20..140) > 200, "no title text drawn");
        assert_eq!(dark_pixels(&rgb, w, 60..110, 0..400), 0);
        // A family no database holds falls back to the bundled font rather than dropping the text.
        assert!(dark_pixels(&rgb, w, 120..160, 20..60) > 50, "text in an unknown family was dropped");
        // The red square at SVG (150..170, 50..70) is red.
        let at = |x: u32, y: u32| &rgb[((y * w + x) * 3) as usize..((y * w + x) * 3 + 3) as usize];
        assert_eq!(at(320, 120), [0xD6, 0x27, 0x28]);
        assert_eq!(at(390, 10), [255, 255, 255]);
        assert_eq!(fonts().len(), 1, "only the bundled font is loaded");
    }

    #[test]
    fn the_png_is_a_function_of_the_svg() {
        assert_eq!(svg_to_png(SVG).unwrap(), svg_to_png(SVG).unwrap());
        let other = SVG.replace("Title", "Other");
        assert_ne!(svg_to_png(SVG).unwrap(), svg_to_png(&other).unwrap());
        // Only the header, the image data and the end: no chunk that could carry a time or the machine.
        let png = svg_to_png(SVG).unwrap();
        let mut chunks = Vec::new();
        let mut at = 8;
        while at + 8 <= png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            chunks.push(String::from_utf8_lossy(&png[at + 4..at + 8]).into_owned());
            at += 12 + len;
        }
        chunks.dedup();
        assert_eq!(chunks, ["IHDR", "IDAT", "IEND"]);
    }

    #[test]
    fn a_huge_svg_is_drawn_smaller_and_bad_svg_is_an_error() {
        let (w, h, scale) = pixel_size(900.0, 40_000.0);
        assert!(scale < SCALE && u64::from(w) * u64::from(h) <= MAX_PIXELS + 50_000, "{w}×{h} at {scale}");
        assert_eq!(pixel_size(900.0, 2350.0), (1800, 4700, 2.0));
        let err = svg_to_png("<svg").unwrap_err();
        assert!(format!("{err:#}").contains("cannot read the plot's SVG"), "{err:#}");
    }
}
