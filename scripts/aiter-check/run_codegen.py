#!/usr/bin/env python3
"""Runs an AITER checkout's CK blockscale codegen (csrc/ck_gemm_a8w8_blockscale/gen_instances.py) the way
AITER's JIT build does (`python gen_instances.py --working_path DIR --tune_file CSV`), on a machine
without ROCm.

Usage: run_codegen.py AITER_DIR WORKING_PATH MERGED_CSV_OUT TUNED_CSV [TUNED_CSV ...]

The tuned CSVs are concatenated (in order, as AITER's config merge does for configs/ and
configs/model_configs/) into MERGED_CSV_OUT, which is passed as --tune_file. GPU_ARCHS must be set
(e.g. gfx942), so AITER's build_tune_dict filters the rows for that target without asking rocminfo.

One module is stubbed: aiter/jit/utils/cpp_extension.py, which chip_info imports only for
executable_path("rocminfo") and which raises at import time when no ROCm installation is found. The
stub's executable_path raises, so a code path that would need rocminfo fails loudly instead of guessing.
Everything else (chip_info.build_tune_dict, build_targets, torch_guard, the instance list, the codegen)
is AITER's own code; pandas and packaging must be installed.
"""
import os
import runpy
import sys
import types


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    aiter_dir, working_path, merged_csv = sys.argv[1:4]
    tuned = sys.argv[4:]
    if not os.environ.get("GPU_ARCHS"):
        print("error: GPU_ARCHS is not set; set it to the build target, e.g. GPU_ARCHS=gfx942", file=sys.stderr)
        return 2

    import pandas as pd

    frames = []
    for path in tuned:
        if not os.path.isfile(path):
            print(f"error: tuned CSV {path} does not exist", file=sys.stderr)
            return 2
        frames.append(pd.read_csv(path))
    pd.concat(frames, ignore_index=True).to_csv(merged_csv, index=False)

    stub = types.ModuleType("cpp_extension")

    def executable_path(executable: str) -> str:
        raise RuntimeError(
            f"cpp_extension stub: {executable} is not available without ROCm; set GPU_ARCHS so no GPU is queried"
        )

    stub.executable_path = executable_path
    sys.modules["cpp_extension"] = stub

    script_dir = os.path.join(aiter_dir, "csrc", "ck_gemm_a8w8_blockscale")
    script = os.path.join(script_dir, "gen_instances.py")
    sys.path.insert(0, script_dir)
    sys.argv = [script, "--working_path", working_path, "--tune_file", merged_csv]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
