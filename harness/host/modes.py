"""The modes of `pytest --gpu-memsafety[=MODE]` and what each places under every CUDA allocation.

Kept apart (pure constants, no imports) so that the option's converter (fixtures/options.py), loaded in every
pytest run, can name the modes without importing anything else.
"""
from __future__ import annotations

MARKERS, MEMCHECK, PAGES = "markers", "memcheck", "pages"
DEFAULT = MARKERS
MODES = {
    MARKERS: "0xA5 guard bytes before and after every CUDA allocation, checked at each test's teardown (sees writes)",
    MEMCHECK: "tests in batches under compute-sanitizer memcheck, exact allocations, --padding (sees reads and writes "
              "outside every allocation)",
    PAGES: "an unmapped page right after every CUDA allocation, then before it for a test that faults (sees reads "
           "and writes past the page, at full speed)",
}
# Modes whose tests run in the process pytest runs (the others run them in child processes).
IN_PROCESS = frozenset({MARKERS})
CHILD_MODES = frozenset({MEMCHECK, PAGES})
# The allocator placement each mode installs where its tests run (placement/allocator.py).
PLACEMENT_OF = {MARKERS: "markers", MEMCHECK: "exact", PAGES: "page_after"}
