"""The block-FP8 GEMM with the runtimes' meta-parameters: C = (A * As) . (B * Bs)^T, bf16 out.

A [M, K] fp8 with As fp32 [M, K/128] (one scale per token and 128-wide K group); B [N, K] fp8 with Bs fp32
[ceil(N/128), K/128] (one scale per 128x128 block). Meta-parameters BLOCK_SIZE_M/N/K, GROUP_SIZE_M,
num_warps, num_stages, with BLOCK_SIZE_K dividing 128.

The loop follows the structure of the kernel vLLM and SGLang launch (vLLM's
``_w8a8_triton_block_scaled_mm``), so that timings carry over to the runtime:

* the program id is swizzled in groups of GROUP_SIZE_M tile rows;
* rows and columns past the edge wrap around (``% M``, ``% N``) and are masked only at the store;
* one ``tl.dot`` per BLOCK_SIZE_K step, its A and B loads masked against the end of K on every step;
* the step's scales are the group holding its first K index, ``(k * BLOCK_SIZE_K) // group_k``,
  and multiply the fp32 partial product before it is added to the accumulator;
* M, N, K, the group sizes and the strides are runtime arguments under Triton's default integer
  specialization (M = 1 and multiples of 16 compile their own variants), as at the runtime's call.

``MASK_K=False`` drops the K masks (valid only where BLOCK_SIZE_K divides K): the parity measurement
uses it to show what the masks cost; measured cells always run with the masks.
"""

import triton
import triton.language as tl

from .triton_config import SCALE_K, SCALE_N


@triton.jit
def _block_fp8_mm(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr,
    M, N, K, group_n, group_k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_as_m, stride_as_k, stride_bs_k, stride_bs_n,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, MASK_K: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows_here = min(tiles_m - first_m, GROUP_SIZE_M)
    tile_m = first_m + (pid % rows_here)
    tile_n = (pid % per_group) // rows_here

    rows = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    a_scale = as_ptr + rows * stride_as_m
    b_scale = bs_ptr + (cols // group_n) * stride_bs_n

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if MASK_K:
            left = K - step * BLOCK_SIZE_K
            a = tl.load(a_tile, mask=ks[None, :] < left, other=0.0)
            b = tl.load(b_tile, mask=ks[:, None] < left, other=0.0)
        else:
            a = tl.load(a_tile)
            b = tl.load(b_tile)
        group = (step * BLOCK_SIZE_K) // group_k
        sa = tl.load(a_scale + group * stride_as_k)
        sb = tl.load(b_scale + group * stride_bs_k)
        acc += tl.dot(a, b) * sa[:, None] * sb[None, :]
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk

    out = acc.to(c_ptr.dtype.element_ty)
    out_rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_tile = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_tile, out, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


def launch(a, b, a_s, b_s, c, cfg, mask_k=True, kernel=None):
    """One GEMM into ``c`` under :class:`triton_config.TritonConfig` ``cfg`` (arguments in the order and
    with the strides the runtime passes)."""
    m, k = a.shape
    n = b.shape[0]
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n),)
    (kernel or _block_fp8_mm)[grid](
        a, b, c, a_s, b_s,
        m, n, k, SCALE_N, SCALE_K,
        a.stride(-2), a.stride(-1), b.stride(1), b.stride(0), c.stride(-2), c.stride(-1),
        a_s.stride(-2), a_s.stride(-1), b_s.stride(1), b_s.stride(0),
        BLOCK_SIZE_M=cfg.block_m, BLOCK_SIZE_N=cfg.block_n, BLOCK_SIZE_K=cfg.block_k,
        GROUP_SIZE_M=cfg.group_m, MASK_K=mask_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
