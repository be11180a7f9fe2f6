#!/usr/bin/env python3
"""Times a decoder layer's GEMM sequence under kernel-selection policies over a batch (M) sweep.

    python3 harness/layer_sequence.py --layers-csv harness/layers/deepseek-v3-tp8-dense.csv \\
        --m 1,4,16,64,256,1024,4096 --policy selector=out/select_kernel.py --policy vendor \\
        --policy vllm-default --policy vllm-tuned=measurements/h200/vllm-h200-configs \\
        --policy threshold=ck:vendor:64 --out layer.jsonl

For every M and policy each GEMM of the layer (in execution order) is resolved to a kernel the harness runs:
a CK-geometry instance with its split-K, a block-FP8 Triton config, or torch._scaled_mm (policies:
``bsbench/layer.py``). Every GEMM's output is checked against the fp32 reference (errRatio, as the bench);
the whole sequence is captured in one CUDA graph and timed with CUDA events under the bench's cold-L2
rotation; a recheck round runs the policies again in rotated order (``--rounds N``: N rounds in all, each
rotated by one more, and the median over them per line). Before the rounds of each M the first policy that
runs there is timed once and that time discarded (``--no-warmup``: not), since on an H100 the first sequence
timed at an M ran 10-14 us slower than in every later round. Output: one JSON line per (M, policy) in
--out, and a summary on stdout (per policy: geomean over M of time / vendor time; the mixed rule against
vendor alone, vLLM's default, vLLM's tuned files and the best threshold).

``--dry-run`` resolves the choices without a GPU; ``--summarize FILE`` prints the summary of a finished run.
Exit codes: 0 done, 2 bad arguments, 3 no PyTorch, 4 no Triton, 5 no CUDA device, 6 device lost.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bsbench import config, env, layer  # noqa: E402

DEFAULT_M = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096"


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--layers-csv", help="CSV name,N,K: the layer's GEMMs in execution order (# comments)")
    src.add_argument("--layers", help="N:K,N:K,... (or name=N:K,...) in execution order")
    p.add_argument("--m", default=DEFAULT_M, help="M values, comma-separated (default %(default)s)")
    p.add_argument("--policy", action="append", default=[],
                   help="repeatable: %s" % layer.POLICY_FORMS)
    p.add_argument("--out", help="JSON lines, one per (M, policy)")
    p.add_argument("--instances", default=None, help="CK instance table (default ck-instances/ck_a8w8_blockscale_instances.csv)")
    p.add_argument("--vllm-device", default=layer.VLLM_DEVICE,
                   help="device_name in vLLM's file names (default %(default)s)")
    p.add_argument("--mapping", default=config.DEFAULT_MAPPING_TEXT, help="CK instance -> warps/stages rule (the bench's)")
    p.add_argument("--budget-ms", type=float, default=4.0, help="timed replay budget per sequence (default %(default)s)")
    p.add_argument("--min-reps", type=int, default=20)
    p.add_argument("--max-reps", type=int, default=100)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--compile-jobs", type=int, default=1, help="worker processes compiling the Triton variants first")
    p.add_argument("--no-recheck", action="store_true", help="skip the recheck round (the same as --rounds 1)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds over all policies per M, each in an order rotated by one more (default 2: the first "
                        "and the recheck); from 3, each line also gets the median over the rounds")
    p.add_argument("--no-warmup", action="store_true",
                   help="time every M's policies without first timing one of them once and discarding that time")
    p.add_argument("--no-graph", action="store_true", help="time single sequences between events with an L2 flush")
    p.add_argument("--dry-run", action="store_true", help="resolve and print the choices (JSON lines), no GPU")
    p.add_argument("--summarize", metavar="FILE", help="print the summary of a finished run's JSON lines and exit")
    a = p.parse_args(argv)
    if a.summarize:
        return a
    if not (a.layers_csv or a.layers):
        p.error("give the layer: --layers-csv FILE or --layers N:K,...")
    if not a.dry_run and not a.out:
        p.error("--out FILE is required (JSON lines); the summary goes to stdout")
    if a.min_reps < 1 or a.max_reps < a.min_reps or a.compile_jobs < 1:
        p.error("need 1 <= --min-reps <= --max-reps and --compile-jobs >= 1")
    if a.no_recheck and a.rounds is not None:
        p.error("--no-recheck and --rounds both set the number of rounds; give one (--no-recheck is --rounds 1)")
    if a.rounds is None:
        a.rounds = 1 if a.no_recheck else 2
    if not 1 <= a.rounds <= 20:
        p.error("--rounds must be 1 to 20, not %d" % a.rounds)
    return a


def read_lines(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                raise layer.LayerError("%s:%d: not JSON (%s)" % (path, i, e))
    return rows


def labels_and_kinds(rows):
    labels, kinds = [], {}
    for r in rows:
        lab = r.get("policy")
        if lab not in kinds:
            labels.append(lab)
            kinds[lab] = r.get("kind", "")
    return labels, kinds


def setup(a):
    """(gemms, ms, policies, planned choices) — every check that needs no GPU."""
    gemms = layer.parse_layers_csv(a.layers_csv) if a.layers_csv else layer.parse_layers_arg(a.layers)
    ms = layer.parse_m_list(a.m)
    policies = layer.parse_policies(a.policy)
    instances = layer.load_ck_instances(a.instances)
    resolvers = {p.label: layer.resolver(p, instances, a.vllm_device) for p in policies}
    planned = layer.plan(gemms, ms, policies, resolvers)
    for p in policies:
        if p.kind == "vllm-tuned":
            missing = [g.name for g in gemms if resolvers[p.label].entries(g) is None]
            if missing:
                log("# %s: no file for %s: vLLM's default config there" % (p.label, ", ".join(missing)))
    return gemms, ms, policies, planned


def base_line(m, p, gemms, choices, source):
    return {"M": m, "policy": p.label, "kind": p.kind, "layer": source,
            "gemms": [c.to_json(g) for g, c in zip(gemms, choices)]}


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.summarize:
        try:
            rows = read_lines(a.summarize)
        except (OSError, layer.LayerError) as e:
            sys.stderr.write("error: %s\n" % e)
            return env.EXIT_USAGE
        labels, kinds = labels_and_kinds(rows)
        print(layer.summary_text(rows, labels, kinds))
        return 0
    try:
        mapping = config.parse_mapping(a.mapping)
        gemms, ms, policies, planned = setup(a)
    except (OSError, ValueError) as e:  # LayerError is a ValueError
        sys.stderr.write("error: %s\n" % e)
        return env.EXIT_USAGE
    source = os.path.basename(a.layers_csv) if a.layers_csv else "--layers " + a.layers
    if a.dry_run:
        out = open(a.out, "w", encoding="utf-8") if a.out else sys.stdout
        for m in ms:
            for p in policies:
                row = base_line(m, p, gemms, planned[(m, p.label)], source)
                row["status"] = "planned"
                out.write(json.dumps(row) + "\n")
        if a.out:
            out.close()
        return 0

    try:
        torch = env.import_torch()
        triton = env.import_triton()
        device = env.detect(torch)
    except env.EnvError as e:
        hint = " (layer_sequence.py times kernels on a CUDA GPU; --dry-run resolves the choices without one)"
        sys.stderr.write("error: %s%s\n" % (e, hint if e.code == env.EXIT_NO_GPU else ""))
        return e.code
    log("# device %s torch %s triton %s" % (json.dumps(device), torch.__version__, triton.__version__))
    if any(p.kind == "vllm-tuned" for p in policies) and device["name"].replace(" ", "_") != a.vllm_device:
        log("# note: vLLM's runtime on %s would look for device_name=%s files, not %s"
            % (device["name"], device["name"].replace(" ", "_"), a.vllm_device))
    from bsbench import compile_pool, layer_runner, runner
    from bsbench.vendor import scale_layouts
    opts = runner.Options(mapping, budget_us=a.budget_ms * 1e3, min_reps=a.min_reps, max_reps=a.max_reps,
                          use_graph=not a.no_graph, seed=a.seed, compile_jobs=a.compile_jobs)
    lr = layer_runner.LayerRunner(device, opts, scale_layouts, log)
    rows = []
    t_start = time.time()
    try:
        lr.precompile(gemms, planned, compile_pool.warm_cache)
        with open(a.out, "w", encoding="utf-8") as out:
            for m in ms:
                by_label = {p.label: planned[(m, p.label)] for p in policies}
                results = {p.label: [] for p in policies}
                try:
                    ctxs, n_sets = lr.contexts(m, gemms, by_label)
                except Exception as e:
                    log("M=%d: cannot allocate the layer's buffers: %s" % (m, e))
                    runner.check_device()
                    ctxs, n_sets = None, 0
                    for p in policies:
                        results[p.label].append({"status": "fail:" + runner.classify(e), "failed_gemm": None})
                warm = None
                if ctxs is not None:
                    if not a.no_warmup:
                        warm = lr.warm_up(m, gemms, [(p.label, by_label[p.label]) for p in policies], ctxs)
                rounds = [] if ctxs is None else [layer.rotated(policies, r) for r in range(a.rounds)]
                for order in rounds:
                    for p in order:
                        results[p.label].append(lr.measure(m, gemms, by_label[p.label], ctxs))
                for p in policies:
                    row = base_line(m, p, gemms, by_label[p.label], source)
                    first = results[p.label][0]
                    errs = first.get("errRatio") or []
                    for g, e in zip(row["gemms"], errs):
                        g["errRatio"] = e
                    row.update({k: v for k, v in first.items() if k != "errRatio"})
                    if len(results[p.label]) > 1:
                        again = results[p.label][1]
                        row["status_recheck"] = again["status"]
                        row["us_recheck"] = again.get("us")
                    if len(results[p.label]) > 2:
                        row.update(layer.rounds_fields(results[p.label]))
                    if row.get("us"):
                        row["tflops"] = layer.layer_flops(m, gemms) / row["us"] / 1e6
                    row.update({"n_sets": n_sets, "gfx": device["gfx"], "device": device["name"],
                                "backend": device["backend"], "warmup": warm})
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                del ctxs
                torch.cuda.empty_cache()
                log("# M=%d done (%s), %.1f s" % (m, ", ".join("%s %s" % (r["policy"], r.get("us") and "%.1f us" % r["us"]
                                                                           or r["status"]) for r in rows[-len(policies):]),
                                                  time.time() - t_start))
    except env.EnvError as e:
        sys.stderr.write("error: %s\n" % e)
        return e.code
    print(layer.summary_text(rows, [p.label for p in policies], {p.label: p.kind for p in policies}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
