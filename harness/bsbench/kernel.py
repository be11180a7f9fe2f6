"""The Triton FP8 blockscale GEMM: Y = (XQ * x_scale) . (WQ * w_scale)^T with fp32 accumulation.

XQ [M, K] fp8, x_scale fp32 [M, K/128]; WQ [N, K] fp8, w_scale fp32 [ceil(N/128), K/128]. The two scales
are applied per 128-wide K group to the fp32 partial product of that group. A program computes one
BLOCK_M x BLOCK_N tile over a contiguous range of scale groups; with split-K (ATOMIC) the ranges of the
splits are added into an fp32 workspace with atomics, otherwise the tile is stored in the output dtype.
Only portable Triton is used, so the same source runs on CUDA and ROCm.
"""

import triton
import triton.language as tl

from .config import GROUP_SIZE_M, SCALE_K, SCALE_N, cdiv


@triton.jit(do_not_specialize=["M", "groups_per_split", "stride_xsm", "stride_wsn"])
def _blockscale_gemm(
    x_ptr, w_ptr, out_ptr, xs_ptr, ws_ptr,
    M, N, K, groups_per_split,
    stride_xm, stride_wn, stride_om, stride_xsm, stride_wsn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, GROUP_K: tl.constexpr, GROUP_N: tl.constexpr,
    ATOMIC: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Swizzle: GROUP_M tile rows share the W tiles they read while resident in L2.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows/columns past the edge re-read valid memory; their results are masked at the store.
    offs_xm = offs_m % M
    offs_wn = offs_n % N
    offs_k = tl.arange(0, GROUP_K)
    GROUPS_PER_STEP: tl.constexpr = BLOCK_K // GROUP_K

    num_groups = K // GROUP_K
    g_begin = pid_k * groups_per_split
    g_end = tl.minimum(g_begin + groups_per_split, num_groups)

    x_ptrs = x_ptr + offs_xm[:, None] * stride_xm + (g_begin * GROUP_K + offs_k)[None, :]
    w_ptrs = w_ptr + offs_wn[None, :] * stride_wn + (g_begin * GROUP_K + offs_k)[:, None]
    xs_ptrs = xs_ptr + offs_xm * stride_xsm + g_begin
    ws_ptrs = ws_ptr + (offs_wn // GROUP_N) * stride_wsn + g_begin

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for g in range(g_begin, g_end, GROUPS_PER_STEP):
        # One KPerBLOCK step = GROUPS_PER_STEP scale groups, each with its own scale loads.
        for j in tl.static_range(GROUPS_PER_STEP):
            if EVEN_K:
                a = tl.load(x_ptrs + j * GROUP_K)
                b = tl.load(w_ptrs + j * GROUP_K)
                a_s = tl.load(xs_ptrs + j)
                b_s = tl.load(ws_ptrs + j)
            else:
                # Only the last step of an odd number of groups is partial: mask its second group.
                k_valid = (offs_k * 0 + g + j) < g_end
                a = tl.load(x_ptrs + j * GROUP_K, mask=k_valid[None, :], other=0.0)
                b = tl.load(w_ptrs + j * GROUP_K, mask=k_valid[:, None], other=0.0)
                a_s = tl.load(xs_ptrs + j, mask=(offs_xm * 0 + g + j) < g_end, other=0.0)
                b_s = tl.load(ws_ptrs + j, mask=(offs_wn * 0 + g + j) < g_end, other=0.0)
            acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
        xs_ptrs += GROUPS_PER_STEP
        ws_ptrs += GROUPS_PER_STEP

    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if ATOMIC:
        tl.atomic_add(out_ptrs, acc, mask=mask, sem="relaxed")
    else:
        tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, w, xs, ws, out, cfg, groups_per_split, n_splits, atomic):
    """Launches one GEMM (or, with ``atomic``, the accumulation of ``n_splits`` K ranges into ``out``,
    an fp32 workspace that the caller zeroes first). ``cfg`` is a :class:`config.LaunchConfig`."""
    m, k = x.shape
    n = w.shape[0]
    num_groups = k // SCALE_K
    per_step = cfg.block_k // SCALE_K
    even_k = (num_groups % per_step == 0) and (groups_per_split % per_step == 0)
    grid = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), n_splits)
    _blockscale_gemm[grid](
        x, w, out, xs, ws,
        m, n, k, groups_per_split,
        x.stride(0), w.stride(0), out.stride(0), xs.stride(0), ws.stride(0),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        GROUP_M=GROUP_SIZE_M, GROUP_K=SCALE_K, GROUP_N=SCALE_N,
        ATOMIC=atomic, EVEN_K=even_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
