"""Smallest set of Triton configs within a tolerance of every sample shape's best (exact set cover).

Reads space-sweep journals (JSON lines of ``blockscale_bench.py``), the sample and validation shape lists,
and writes what the kept set is and how it does:

    python3 harness/triton_cover.py --space measurements/h200/triton-space/space-*.jsonl.gz \\
        --sample measurements/h200/triton-space/sample.csv --validate measurements/h200/triton-space/validate.csv \\
        --tolerance 0.01 --out measurements/h200/triton-space/cover.json

A cell counts only when it is ``ok`` and graph-timed (``timing`` "graph", first measurement, not a
recheck): a screened cell (``timing`` "estimate") was estimated at more than twice the best median so far
on its shape, so it can never be within the tolerance and is not a candidate. A shape is complete when
every config of the space has a row (ok, screened or failed); the cover uses complete shapes only and
refuses to run if a listed sample shape is incomplete. A journal line that is no result line (but a last
line cut off by a stopped run, skipped with a note), sizes that are not positive integers and an ok cell's
``us`` that is not a finite positive time are errors naming the file and line; ``--tolerance`` must be finite
and >= 0; ``--out`` is written whole or not at all (a directory, or one in a directory that does not exist,
is refused before any journal is read).

The cover is exact: a depth-first branch and bound over the shapes hardest to cover first (fewest
covering configs), bounded by the best set found so far. Among the smallest sets it keeps the one with the
lowest geomean loss over the sample (time of the set's best config / the shape's best), ties broken by
config name, so the result is deterministic.

``--incumbent FILE`` (kept.txt's format: one config name per line, ``#`` comments) names the set in use,
whose configs other measurements were taken with. When some of its configs still make a cover of the
minimum size, that subset is kept (``kept_from`` "incumbent") and the best minimum cover is reported next
to it (``best_cover``); otherwise the best cover is kept (``kept_from`` "best") and the output says the
incumbent no longer is a minimum cover.

``--other-space GLOB...`` adds another card's journals of the same sample and validation shapes: the cover
must then be within the tolerance of every sample shape's best on both cards (a shape is then (M, N, K,
space): space 0 is ``--space``, 1 ``--other-space``), and the losses are reported per card
(``by_space``). The other card's shapes not measured over the whole space are left out and named.

``--score FILE`` (the same format) searches no cover: it reports how that set does on this space's sample
and validation shapes, for instance a set chosen on another card's space (``kept_from`` "score"). On a
shape where every config of the set was screened, its pick is the set's fastest screen (``kept_timing``
"estimate": more than twice the shape's best, so the loss shown is below the true one).
"""
import argparse
import csv
import glob
import json
import math
import os
import sys

import triton_plan


def read_shapes(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for i, r in enumerate(rows, start=2):
        try:
            out.append((int(r["M"]), int(r["N"]), int(r["K"])))
        except (KeyError, ValueError) as e:
            raise ValueError("%s:%d: need integer columns M, N, K (%s)" % (path, i, e))
    return out


def read_space(paths, screens=None):
    """{(M, N, K): {config name: us}} of graph-timed ok cells, and {(M, N, K): rows seen}; the screened
    cells' estimates go to ``screens`` ({(M, N, K): {config name: us}}) when it is given. A line that is no
    result line (but a last line cut off by a stopped run), sizes that are not positive integers, and an ok
    cell's ``us`` that is not a finite positive time are errors naming the file and line."""
    times, seen = {}, {}
    for path in paths:
        for lineno, r in triton_plan.result_lines(path, strict=True):
            if r.get("libtype") != "triton" or r.get("recheck", 0):
                continue
            where = "%s:%d" % (path, lineno)
            try:
                shape, name = (r["M"], r["N"], r["K"]), r["kernelName"]
            except KeyError as e:
                raise ValueError("%s: a triton result line needs M, N, K and kernelName (no %s)" % (where, e))
            if any(type(x) is not int or x < 1 for x in shape):
                raise ValueError("%s: M, N, K = %s: expected positive integers" % (where, json.dumps(shape)))
            if not isinstance(name, str) or not name:
                raise ValueError("%s: kernelName = %s: expected a config name" % (where, json.dumps(name)))
            seen.setdefault(shape, set()).add(name)
            if r.get("status") == "ok" and r.get("timing") in ("graph", "estimate"):
                us = r.get("us")
                if type(us) not in (int, float) or not 0 < us <= sys.float_info.max:
                    raise ValueError("%s: us = %s: expected a finite positive time in microseconds (an ok cell, "
                                     "timing %s)" % (where, json.dumps(us), r["timing"]))
                if r["timing"] == "graph":
                    times.setdefault(shape, {})[name] = float(us)
                elif screens is not None:
                    screens.setdefault(shape, {})[name] = float(us)
    return times, seen


def exact_cover(universe, covers_of, order_key):
    """Smallest list of sets (keys of ``covers_of``: config -> frozenset of shapes) covering ``universe``;
    every minimum-size cover is passed to ``order_key`` and the least is returned."""
    configs = sorted(covers_of)
    by_shape = {s: [c for c in configs if s in covers_of[c]] for s in universe}
    for s, cs in by_shape.items():
        if not cs:
            raise ValueError("shape %s has no config within the tolerance" % (s,))
    best = {"size": len(universe) + 1, "sets": []}

    def rec(uncovered, chosen):
        if not uncovered:
            if len(chosen) < best["size"]:
                best["size"], best["sets"] = len(chosen), [list(chosen)]
            elif len(chosen) == best["size"]:
                best["sets"].append(list(chosen))
            return
        if len(chosen) >= best["size"]:
            return
        # lower bound: one more set at least; prune when even that cannot tie
        if len(chosen) + 1 > best["size"]:
            return
        s = min(uncovered, key=lambda x: (len(by_shape[x]), x))
        for c in by_shape[s]:
            chosen.append(c)
            rec(uncovered - covers_of[c], chosen)
            chosen.pop()

    rec(frozenset(universe), [])
    uniq = {tuple(sorted(s)) for s in best["sets"]}
    return min(uniq, key=order_key)


def read_names(path):
    names = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    if not names:
        raise ValueError("%s: no config names" % path)
    return names


def choose(universe, covers_of, order_key, incumbent=None):
    """The kept set and where it comes from: (kept, "best" | "incumbent", best minimum cover)."""
    best = exact_cover(universe, covers_of, order_key)
    if incumbent is None:
        return best, "best", best
    mine = {c: covers_of[c] for c in incumbent if c in covers_of}
    try:
        held = exact_cover(universe, mine, order_key)
    except ValueError:
        return best, "best", best
    if len(held) == len(best):
        return held, "incumbent", best
    return best, "best", best


def loss(times, shape, kept):
    best = min(times[shape].values())
    got = min((times[shape][c] for c in kept if c in times[shape]), default=math.inf)
    return got / best


def geomean(xs):
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--space", nargs="+", required=True, help="journals (globs are expanded)")
    p.add_argument("--sample", required=True)
    p.add_argument("--validate", required=True)
    p.add_argument("--space-size", type=int, default=1280)
    p.add_argument("--tolerance", type=float, default=0.01)
    p.add_argument("--incumbent", help="file of the config names in use (kept.txt's format): kept while a "
                   "subset of them is still a minimum cover")
    p.add_argument("--score", help="file of config names (kept.txt's format): search no cover, report how "
                   "this set does on the sample and validation shapes")
    p.add_argument("--other-space", nargs="+", help="journals of the same shapes on another card (globs are "
                   "expanded): cover both cards' sample shapes, report each card's losses")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.score and a.incumbent:
        sys.stderr.write("error: --score and --incumbent exclude each other (--score searches no cover)\n")
        return 2
    if not 0 <= a.tolerance < math.inf:
        sys.stderr.write("error: --tolerance %s: expected a finite share >= 0 (0.01: within 1%% of the best)\n"
                         % a.tolerance)
        return 2
    paths = sorted({q for g in a.space for q in (glob.glob(g) or [g])})
    screens = {}
    other = sorted({q for g in a.other_space or () for q in (glob.glob(g) or [g])})
    inputs = paths + other + [x for x in (a.sample, a.validate, a.incumbent, a.score) if x]
    try:
        triton_plan.check_out(a.out, inputs, "JSON file")
    except (OSError, ValueError) as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    try:
        times, seen = read_space(paths, screens)
        sample, validate = read_shapes(a.sample), read_shapes(a.validate)
        if other:
            # every shape becomes (M, N, K, space); the other card's incomplete shapes are left out by name
            screens2 = {}
            times2, seen2 = read_space(other, screens2)
            other_left = [x for x in dict.fromkeys(sample + validate) if len(seen2.get(x, ())) < a.space_size]
            times, seen, screens = ({x + (i,): v for i, d in enumerate(pair) for x, v in d.items()}
                                    for pair in ((times, times2), (seen, seen2), (screens, screens2)))
            sample = [x + (0,) for x in sample] + [x + (1,) for x in sample if x not in other_left]
            validate = [x + (0,) for x in validate] + [x + (1,) for x in validate if x not in other_left]
        incumbent = read_names(a.incumbent) if a.incumbent else None
        scored = read_names(a.score) if a.score else None
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    measured = set().union(*seen.values()) if seen else set()
    for path, names in ((a.incumbent, incumbent), (a.score, scored)):
        unknown = [c for c in names or () if c not in measured]
        if unknown:
            sys.stderr.write("error: %s: not configs of the measured space: %s\n" % (path, ", ".join(unknown)))
            return 2
    incomplete = [s for s in sample if len(seen.get(s, ())) < a.space_size]
    sample_left = []
    if incomplete and scored is not None:
        # scoring needs no cover of the sample: the incomplete shapes are named and left out
        sample_left, sample = incomplete, [s for s in sample if s not in incomplete]
        if not sample:
            sys.stderr.write("error: no sample shape is measured over the whole space (M, N, K: rows): %s\n"
                             % ", ".join("%s: %d" % (s, len(seen.get(s, ()))) for s in incomplete))
            return 2
    elif incomplete:
        sys.stderr.write("error: sample shapes not measured over the whole space (M, N, K: rows): %s\n"
                         % ", ".join("%s: %d" % (s, len(seen.get(s, ()))) for s in incomplete))
        return 2
    no_best = [s for s in sample if s not in times]
    if no_best:
        sys.stderr.write("error: sample shapes without a graph-timed ok row (every config refused or screened): %s\n"
                         % ", ".join("M=%d N=%d K=%d" % s[:3] for s in no_best))
        return 2
    covers_of = {}
    for s in sample:
        best = min(times[s].values())
        for c, t in times[s].items():
            if t <= best * (1 + a.tolerance):
                covers_of.setdefault(c, set()).add(s)
    covers_of = {c: frozenset(v) for c, v in covers_of.items()}
    if scored is not None:
        kept, kept_from, best_cover = tuple(scored), "score", None
    else:
        try:
            kept, kept_from, best_cover = choose(sample, covers_of,
                                                 lambda cs: (geomean(loss(times, s, cs) for s in sample), cs),
                                                 incumbent)
        except ValueError as e:
            sys.stderr.write("error: %s\n" % e)
            return 2
    val_done = [s for s in validate if len(seen.get(s, ())) >= a.space_size]
    val_left = [s for s in validate if s not in val_done]

    def rows(shapes):
        out = []
        for s in shapes:
            if s not in times:
                raise ValueError("shape M=%d N=%d K=%d has no graph-timed ok row: no best to measure a loss "
                                 "against" % s[:3])
            best_c = min(times[s], key=lambda c: (times[s][c], c))
            timing, got = "graph", times[s]
            if not any(c in got for c in kept):
                # only a scored set can lack a graph-timed cell here (a cover covers every sample shape)
                timing, got = "estimate", screens.get(s, {})
            pick = min((c for c in kept if c in got), key=lambda c: (got[c], c), default=None)
            if pick is None:
                raise ValueError("%s: no config of the set has an ok row on shape M=%d N=%d K=%d"
                                 % (a.score or a.incumbent or "the cover", *s[:3]))
            out.append({"M": s[0], "N": s[1], "K": s[2], "best": best_c, "best_us": times[s][best_c],
                        "kept_pick": pick, "kept_us": got[pick], "kept_timing": timing,
                        "loss": got[pick] / times[s][best_c], "graph_timed": len(times[s]), "rows": len(seen[s])})
            if other:
                out[-1]["space"] = s[3]
        return out

    try:
        srows, vrows = rows(sample), rows(val_done)
    except ValueError as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    result = {
        "tolerance": a.tolerance,
        "journals": [p.split("/")[-1] for p in paths],
        "sample_shapes": len(sample),
        "sample_left": [list(s) for s in sample_left],
        "candidates_within_tolerance": len(covers_of),
        "kept": list(kept),
        "kept_from": kept_from,
        "best_cover": list(best_cover) if best_cover is not None else None,
        "best_cover_sample_loss_geomean": (geomean(loss(times, s, best_cover) for s in sample)
                                           if best_cover is not None else None),
        "best_cover_validation_loss_geomean": (geomean(loss(times, s, best_cover) for s in val_done)
                                               if val_done and best_cover is not None else None),
        "sample_loss_geomean": geomean(r["loss"] for r in srows),
        "sample_loss_max": max(r["loss"] for r in srows),
        "validation_shapes": len(val_done),
        "validation_left": [list(s) for s in val_left],
        "validation_loss_geomean": geomean(r["loss"] for r in vrows) if vrows else None,
        "validation_loss_max": max((r["loss"] for r in vrows), default=None),
        "sample": srows,
        "validation": vrows,
    }
    if other:
        result["other_space_journals"] = [q.split("/")[-1] for q in other]
        result["other_space_left"] = [list(x) for x in other_left]
        result["by_space"] = [{
            "space": i,
            "sample_shapes": sum(r["space"] == i for r in srows),
            "sample_loss_geomean": (geomean(r["loss"] for r in srows if r["space"] == i)
                                    if any(r["space"] == i for r in srows) else None),
            "validation_shapes": sum(r["space"] == i for r in vrows),
            "validation_loss_geomean": (geomean(r["loss"] for r in vrows if r["space"] == i)
                                        if any(r["space"] == i for r in vrows) else None),
        } for i in (0, 1)]
    def write(f):
        json.dump(result, f, indent=1)
        f.write("\n")
    # Written whole or not at all: the .part file is removed on any error.
    error = triton_plan.write_whole(a.out, ".part", write)
    if error:
        sys.stderr.write("error: %s\n" % error)
        return 2
    print("%s %d configs (%s): %s" % ("scored" if scored is not None else "kept", len(kept), kept_from,
                                      " ".join(kept)))
    if incumbent is not None and kept_from == "best":
        print("the incumbent (%s) is no longer a minimum cover: no %d of its configs cover the sample"
              % (a.incumbent, len(best_cover)))
    if best_cover is not None and tuple(best_cover) != tuple(kept):
        print("best minimum cover: %s (sample loss geomean %.4f)"
              % (" ".join(best_cover), result["best_cover_sample_loss_geomean"]))
    print("sample: %d shapes, loss geomean %.4f max %.4f%s" % (
        len(sample), result["sample_loss_geomean"], result["sample_loss_max"],
        "; not measured over the whole space, left out: %s" % sample_left if sample_left else ""))
    for b in result.get("by_space", ()):
        g, v = b["sample_loss_geomean"], b["validation_loss_geomean"]
        print("  space %d (%s): sample %d shapes, loss geomean %s; validation %d shapes, loss geomean %s" % (
            b["space"], "--space" if b["space"] == 0 else "--other-space", b["sample_shapes"],
            "-" if g is None else "%.4f" % g, b["validation_shapes"], "-" if v is None else "%.4f" % v))
    if other and other_left:
        print("  --other-space shapes not measured over the whole space, left out: %s" % other_left)
    est = [r for r in srows + vrows if r["kept_timing"] == "estimate"]
    if est:
        print("%d shapes where every config of the set was screened (loss from its fastest screen, a lower "
              "bound): %s" % (len(est), ", ".join("M=%d N=%d K=%d" % (r["M"], r["N"], r["K"]) for r in est)))
    if vrows:
        print("validation: %d shapes, loss geomean %.4f max %.4f; left: %s" % (
            len(vrows), result["validation_loss_geomean"], result["validation_loss_max"], val_left))
    return 0


if __name__ == "__main__":
    sys.exit(main())
