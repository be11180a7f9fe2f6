//! AITER main integration: the heuristic on AITER's untuned a8w8 blockscale path, as a patch.
//!
//! On AITER main (e4048607a5) Python looks (gfx, cu_num, M, N, K) up in the merged tuned CSV and passes
//! the row's kernelName and splitK to `gemm_a8w8_blockscale`; without a row it passes an empty name and
//! splitK 0, and the C++ side runs one fixed default kernel at every shape. [`patch`] renders a unified
//! diff that puts a rule on that path (see its docs for the four files), [`apply`] applies or checks it on
//! a checkout (idempotent; says which hunk no longer matches), and [`kit`] writes what
//! `scripts/check-aiter-patch.sh` needs to compile the patched sources with g++ and compare their
//! choices with the interpreter. `synth run` writes the main rule's patch to
//! `generated/aiter/gemm_a8w8_blockscale_heuristic.patch`; `synth aiter` is `app::aiter`.

pub mod apply;
pub mod install;
pub mod kit;
pub mod patch;
pub mod templates;

pub use patch::{render_patch, PATCH_FILE};

/// Directory of `generated/` holding the patch.
pub const GENERATED_SUBDIR: &str = "aiter";
