"""Puts the harness directory on sys.path so tests import ``bsbench`` the way the entry point does."""
import os
import sys

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if HARNESS not in sys.path:
    sys.path.insert(0, HARNESS)
