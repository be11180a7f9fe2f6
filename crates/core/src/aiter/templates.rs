//! The minijinja environment of the AITER files (`templates/aiter/`): the patch's templates and the check
//! kit's, compiled into the binary with the header renderer's settings. Shared by [`super::patch`] and
//! [`super::kit`], so neither imports the other for it.

use std::sync::OnceLock;

use minijinja::Environment;
use serde::Serialize;

use crate::render;

pub const TAIL_TEMPLATE: &str = "aiter/gemm_a8w8_blockscale_heuristic_aiter.h.j2";
pub const KERNELS_MODULE_TEMPLATE: &str = "aiter/gemm_a8w8_blockscale_heuristic_kernels.py.j2";
pub const CU_TEMPLATE: &str = "aiter/gemm_a8w8_blockscale.cu.hunks.j2";
pub const GEN_TEMPLATE: &str = "aiter/gen_instances.py.hunks.j2";
pub const OPS_TEMPLATE: &str = "aiter/gemm_op_a8w8.py.hunks.j2";
pub const TORCH_TEMPLATE: &str = "aiter/check/torch_extension.h.j2";
pub const COMMON_TEMPLATE: &str = "aiter/check/common.cuh.j2";
pub const KERNELS_TEMPLATE: &str = "aiter/check/kernels.cpp.j2";
pub const RECORD_TEMPLATE: &str = "aiter/check/kernel_record.h.j2";
pub const DRIVER_TEMPLATE: &str = "aiter/check/driver.cpp.j2";

/// The template environment of the AITER files (same settings as the header renderer's).
pub fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        render::jinja::environment(&[
            (TAIL_TEMPLATE, include_str!("../../../../templates/aiter/gemm_a8w8_blockscale_heuristic_aiter.h.j2")),
            (
                KERNELS_MODULE_TEMPLATE,
                include_str!("../../../../templates/aiter/gemm_a8w8_blockscale_heuristic_kernels.py.j2"),
            ),
            (CU_TEMPLATE, include_str!("../../../../templates/aiter/gemm_a8w8_blockscale.cu.hunks.j2")),
            (GEN_TEMPLATE, include_str!("../../../../templates/aiter/gen_instances.py.hunks.j2")),
            (OPS_TEMPLATE, include_str!("../../../../templates/aiter/gemm_op_a8w8.py.hunks.j2")),
            (TORCH_TEMPLATE, include_str!("../../../../templates/aiter/check/torch_extension.h.j2")),
            (COMMON_TEMPLATE, include_str!("../../../../templates/aiter/check/common.cuh.j2")),
            (KERNELS_TEMPLATE, include_str!("../../../../templates/aiter/check/kernels.cpp.j2")),
            (RECORD_TEMPLATE, include_str!("../../../../templates/aiter/check/kernel_record.h.j2")),
            (DRIVER_TEMPLATE, include_str!("../../../../templates/aiter/check/driver.cpp.j2")),
        ])
    })
}

/// Renders one of the templates above.
pub fn render_template(template: &str, ctx: impl Serialize) -> anyhow::Result<String> {
    env()
        .get_template(template)
        .and_then(|t| t.render(ctx))
        .map_err(|e| anyhow::anyhow!("rendering templates/{template} failed: {e:#}"))
}
