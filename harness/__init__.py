"""GPU measurement harness (see README.md); the entry point is blockscale_bench.py."""
