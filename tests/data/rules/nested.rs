// Nested chains in the Rust form, as a function's tail expression.
fn select(m: u32, n: u32, k: u32) -> (Kernel, u32) {
    if m <= 64 {
        if n >= 8192 {
            (4, 0)
        } else {
            a8w8_blockscale_1x128x128_256x16x64x256_16x16_16x16_1x1_16x16x1_16x16x1_1x16x1x16_4_1x1_intrawave_v1
        }
    } else if (m as i64).div_ceil(128) * n.div_ceil(128) >= 2 * 304 && !(k < 1024) {
        (0, 1)
    } else {
        kernel(-1)
    }
}
