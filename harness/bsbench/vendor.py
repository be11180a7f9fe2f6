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
    dimension is the K-block count rounded up to a multiple of 4 (16-byte aligned): ``b transposed view`` is
    right only where K/128 is a multiple of 4, and silently wrong elsewhere (K = 2304 gives 18 blocks), so the
    padded forms come first: the (K/128, N/128) view of storage padded to four K-blocks (the shape the API
    documents, the leading dimension cuBLAS reads), then the padded tensor itself. Where K/128 is a multiple
    of 4 all three are the same tensor."""
    xs_cm = xs.t().contiguous().t()
    kb = ws.shape[1]
    ws_pad = torch.nn.functional.pad(ws, (0, -kb % 4)) if kb % 4 else ws
    return [
        ("a col-major, b as-is", xs_cm, ws),
        ("a row-major, b as-is", xs, ws),
        ("a col-major, b transposed", xs_cm, ws.t().contiguous()),
        ("a col-major, b transposed view of storage padded to 4 K-blocks", xs_cm, ws_pad[:, :kb].t()),
        ("a col-major, b K-blocks padded to 4, transposed view", xs_cm, ws_pad.t()),
        ("a col-major, b transposed view", xs_cm, ws.t()),
        ("a row-major, b transposed", xs, ws.t().contiguous()),
        ("a col-major, b col-major", xs_cm, ws.t().contiguous().t()),
    ]


def find_layout(torch, runner, ctx, log, layouts=scale_layouts, prefix=""):
    """The first of ``layouts(torch, xs, ws)`` the library takes and computes right with on ``ctx``; None
    if none does. A layout the library refuses raises one of ``LIBRARY_ERRORS``. ``prefix`` starts every
    word "layout" of the log lines ("vendor " in a layer sequence, where other kernels log too)."""
    x, wq, xs, ws, _, _ = ctx.sets[0]
    for name, sa, sb in layouts(torch, xs, ws):
        try:
            y = torch._scaled_mm(x, wq.t(), sa, sb, out_dtype=torch.bfloat16)
            torch.cuda.synchronize()
        except LIBRARY_ERRORS as e:  # refused by the library: try the next
            log("# %slayout %s rejected at M=%d N=%d K=%d: %s" % (prefix, name, ctx.m, ctx.n, ctx.k, str(e)[:160]))
            continue
        if runner.gpu_err_ratio(y, ctx.ref) <= stats.MAX_ERR_RATIO:
            log("# %sscale layout: %s" % (prefix, name))
            return name
        log("# %slayout %s computes a different product" % (prefix, name))
    return None
