"""The vendor GEMM's scale layouts: which (scale_a, scale_b) tensors ``torch._scaled_mm`` takes for 1x128
activation and 128x128 weight scales, and the search for the one that computes right on a shape. Shared by
``vendor_reference.py`` (one row per shape) and ``layer_runner.py`` (a layer's sequence); ``torch`` and
``runner`` are passed in, so the pure-Python tests can stand in for both."""

from . import stats

#: What the library raises when it refuses a shape or a scale layout (torch's checks raise RuntimeError,
#: some ValueError or NotImplementedError). Anything else (TypeError, AttributeError, ...) is a bug of the
#: caller and is never recorded as the library's refusal.
LIBRARY_ERRORS = (RuntimeError, ValueError, NotImplementedError)


def scale_layouts(torch, xs, ws):
    """Candidate (scale_a, scale_b) layouts; the first one the library accepts and computes right is kept.

    cuBLAS's 128x128 recipe reads the weight scales as a (K/128, N/128) column-major matrix whose leading
    dimension is the K-block count rounded up to a multiple of 4 (16-byte aligned). torch's check of the
    scale tensor has changed across releases: later ones ask for that padded leading dimension (the first
    padded form below), torch 2.11 asks for a leading dimension of exactly K/128 and passes the pointer on
    as it is, so where K/128 is not a multiple of 4 (K = 2304: 18 blocks, read at a pitch of 20) the plain
    ``b transposed view`` is accepted and silently wrong. For that check the second form is a view with the
    leading dimension torch asks for over storage laid out at the pitch cuBLAS reads (on an H100 with torch
    2.11 the padded forms were refused as "Invalid scaling configuration" and the plain view failed the
    correctness check). Where K/128 is a multiple of 4 the padded forms are the plain transposed view."""
    xs_cm = xs.t().contiguous().t()
    kb = ws.shape[1]
    ws_pad = torch.nn.functional.pad(ws, (0, -kb % 4)) if kb % 4 else ws
    pitched = ws_pad.contiguous().reshape(-1).as_strided((kb, ws.shape[0]), (1, kb))
    return [
        ("a col-major, b as-is", xs_cm, ws),
        ("a row-major, b as-is", xs, ws),
        ("a col-major, b transposed", xs_cm, ws.t().contiguous()),
        ("a col-major, b transposed view of storage padded to 4 K-blocks", xs_cm, ws_pad[:, :kb].t()),
        ("a col-major, b K/128-strided view of storage padded to 4 K-blocks", xs_cm, pitched),
        ("a col-major, b K-blocks padded to 4, transposed view", xs_cm, ws_pad.t()),
        ("a col-major, b transposed view", xs_cm, ws.t()),
        ("a row-major, b transposed", xs, ws.t().contiguous()),
        ("a col-major, b col-major", xs_cm, ws.t().contiguous().t()),
    ]


#: cuBLAS's blockwise FP8 GEMM takes M in multiples of 4 only: on an H100 with torch 2.11 every M that is
#: not one was refused (CUBLAS_STATUS_NOT_SUPPORTED) in every scale layout. vLLM's torch._scaled_mm
#: block-FP8 backend pads M up to a multiple of 4 and slices the result back (vLLM PR #49932); so does
#: ``vendor_gemm``.
M_MULTIPLE = 4


def padded_rows(m):
    """M rounded up to the multiple of ``M_MULTIPLE`` the library takes."""
    return -(-m // M_MULTIPLE) * M_MULTIPLE


def _zeros_like_rows(torch, t, rows):
    """A zero tensor of ``t``'s dtype and device with ``rows`` rows (FP8 zeros made as bytes)."""
    if t.element_size() == 1:
        return torch.zeros((rows, t.shape[1]), dtype=torch.uint8, device=t.device).view(t.dtype)
    return torch.zeros((rows, t.shape[1]), dtype=t.dtype, device=t.device)


def vendor_gemm(torch, bufset, layout, layouts=scale_layouts):
    """(op, result) of the vendor GEMM on one buffer set ``(x, wq, xs, ws, out, _)`` in the scale layout named
    ``layout``, called as a runtime calls it. Where M is a multiple of 4, ``op`` writes ``out``. Elsewhere
    every call copies the activations and their scales into buffers of M rounded up to 4 rows (the rows after
    M stay zero), runs the GEMM on those, and ``result`` is the first M rows of its product (a view, as
    vLLM's slice), so both copies are inside every timed call. KeyError for a layout ``layouts`` does not
    offer."""
    x, wq, xs, ws, out, _ = bufset
    m = x.shape[0]
    rows = padded_rows(m)
    if rows == m:
        sa, sb = _layout(layouts(torch, xs, ws), layout)

        def op():
            torch._scaled_mm(x, wq.t(), sa, sb, out_dtype=torch.bfloat16, out=out)
        return op, out
    xp = _zeros_like_rows(torch, x, rows)
    sa, sb = _layout(layouts(torch, _zeros_like_rows(torch, xs, rows), ws), layout)
    outp = torch.empty((rows, out.shape[1]), dtype=out.dtype, device=out.device)

    def op_padded():
        xp[:m].copy_(x)
        sa[:m].copy_(xs)
        torch._scaled_mm(xp, wq.t(), sa, sb, out_dtype=torch.bfloat16, out=outp)
    return op_padded, outp[:m]


def _layout(offered, name):
    for nm, sa, sb in offered:
        if nm == name:
            return sa, sb
    raise KeyError("no scale layout %r" % name)


def find_layout(torch, runner, ctx, log, layouts=scale_layouts, prefix=""):
    """The first of ``layouts(torch, xs, ws)`` the library takes and computes right with on ``ctx`` (run
    through ``vendor_gemm``: M padded to a multiple of 4 where it is not one); None if none does. A layout
    the library refuses raises one of ``LIBRARY_ERRORS``. ``prefix`` starts every word "layout" of the log
    lines ("vendor " in a layer sequence, where other kernels log too)."""
    _, _, xs, ws, _, _ = ctx.sets[0]
    for name, _, _ in layouts(torch, xs, ws):
        try:
            op, result = vendor_gemm(torch, ctx.sets[0], name, layouts)
            result.fill_(float("nan"))
            op()
            torch.cuda.synchronize()
        except LIBRARY_ERRORS as e:  # refused by the library: try the next
            log("# %slayout %s rejected at M=%d N=%d K=%d: %s" % (prefix, name, ctx.m, ctx.n, ctx.k, str(e)[:160]))
            continue
        if runner.gpu_err_ratio(result, ctx.ref) <= stats.MAX_ERR_RATIO:
            log("# %sscale layout: %s" % (prefix, name))
            return name
        log("# %slayout %s computes a different product" % (prefix, name))
    return None
