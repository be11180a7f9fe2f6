"""Per-call cost of AITER's Python-side kernel selection for a8w8 blockscale, in the style of
aiter/ops/gemm_op_a8w8.py::get_CKGEMM_config (ROCm/aiter e4048607a5): functools.lru_cache(maxsize=1024)
over a dict keyed (gfx, cu_num, M, N, K), tried at M, then get_padded_m(..., 0), then (..., 1), with
the f-string log call on a miss (logger below INFO, so only the formatting runs).

Usage: python3 aiter_dispatch_lookup.py SHAPES REPEATS  -> prints "hit MEDIAN" and "random MEDIAN" (ns/call)
"""
import functools
import logging
import random
import statistics
import sys
import time

logger = logging.getLogger("aiter-bench")
logger.setLevel(logging.WARNING)


def next_pow2(x):
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def get_padded_m(M, N, K, gl):  # csrc/py_itfs_cu/gemm_common.cu getPaddedM, in Python
    if gl == 0:
        if M <= 256:
            return (M + 15) // 16 * 16
        if M <= 1024:
            return (M + 31) // 32 * 32
        if M <= 4096:
            return (M + 63) // 64 * 64
        return (M + 127) // 128 * 128
    if gl == 1:
        return 8192 if (M > 8192 and N > 4096) else next_pow2(M)
    return M


@functools.lru_cache(maxsize=1)
def get_gfx():
    return "gfx942"


@functools.lru_cache(maxsize=1)
def get_cu_num():
    return 304


rng = random.Random(0)
# A tuned table of the size of aiter/configs/a8w8_blockscale_tuned_gemm.csv (6630 rows).
TABLE = {}
while len(TABLE) < 6630:
    key = ("gfx942", 304, rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]),
           128 * rng.randint(1, 256), 128 * rng.randint(1, 256))
    TABLE[key] = {"libtype": "ck", "kernelId": 7, "splitK": 0, "kernelName": "a8w8_blockscale_default"}


@functools.lru_cache(maxsize=1024)
def get_CKGEMM_config(M, N, K, tuned_file=None):
    gfx = get_gfx()
    cu_num = get_cu_num()
    config = None
    for gl in [None, 0, 1]:
        padded_M = M if gl is None else get_padded_m(M, N, K, gl)
        config = TABLE.get((gfx, cu_num, padded_M, N, K), None)
        if config is not None:
            break
    if config is None:
        logger.info(f"shape is M:{M}, N:{N}, K:{K}, not found tuned config in {tuned_file}, will use default config!")
    return config


def shapes(count, seed):
    r = random.Random(seed)
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append((max(1, int(2 ** r.uniform(0, 15))), 128 * r.randint(1, 256), 128 * r.randint(1, 256)))
        else:
            out.append((r.randint(1, 65536), r.randint(1, 65536), r.randint(1, 65536)))
    return out


def time_calls(seq, repeats):
    per_call = []
    for _ in range(repeats):
        get_CKGEMM_config.cache_clear()
        t0 = time.perf_counter_ns()
        for m, n, k in seq:
            get_CKGEMM_config(m, n, k, "a8w8_blockscale_tuned_gemm.csv")
        per_call.append((time.perf_counter_ns() - t0) / len(seq))
    return statistics.median(per_call)


def main():
    count, repeats = int(sys.argv[1]), int(sys.argv[2])
    random_shapes = shapes(count, 1)
    pool = random_shapes[:512]  # fits the 1024-entry cache: every call after the first 512 is a hit
    hits = [pool[i % len(pool)] for i in range(count)]
    print(f"hit {time_calls(hits, repeats):.1f}")
    print(f"random {time_calls(random_shapes, repeats):.1f}")


if __name__ == "__main__":
    main()
