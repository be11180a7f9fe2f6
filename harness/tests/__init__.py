"""Unit tests of the harness's pure-Python parts (no torch, no GPU)."""
