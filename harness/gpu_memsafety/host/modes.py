"""The modes of `pytest --gpu-memsafety[=MODE]`: what each places under every CUDA allocation, where its tests run,
and which detectors judge them. The one table of host-suite modes (the judge and the option read it from here).

Kept apart (pure constants, no imports) so that the option's converter (fixtures/options.py), loaded in every
pytest run, can name the modes without importing anything else.
"""
from __future__ import annotations

COMPLETE, MARKERS, MEMCHECK, PAGES, TRACE = "complete", "markers", "memcheck", "pages", "trace"
# The bare flag sees everything it can, as `make sanitize` does: reads and writes.
DEFAULT = COMPLETE
MODES = {
    COMPLETE: "everything that can run (the default): each batch of tests once under the guard markers (every byte "
              "of a write, the tests' own results) and once under compute-sanitizer memcheck with exact allocations "
              "(reads and writes outside every allocation, by kernel and line), one verdict per test",
    MARKERS: "0xA5 guard bytes before and after every CUDA allocation, checked at each test's teardown (sees writes "
             "only; fastest)",
    MEMCHECK: "tests in batches under compute-sanitizer memcheck, exact allocations, --padding (sees reads and writes "
              "outside every allocation)",
    PAGES: "an unmapped page right after every CUDA allocation, then before it for a test that faults (sees reads "
           "and writes past the page, at full speed)",
    TRACE: "no GPU needed: every load, store and atomic of the suite's Triton kernels run by Triton's interpreter "
           "(TRITON_INTERPRET=1, set by the suite) checked against guarded copies of their tensor arguments (reads and "
           "writes, exact bytes; what complete runs on a machine without a GPU)",
}
# Modes whose tests run in the process pytest runs (the others run them in child processes).
IN_PROCESS = frozenset({MARKERS, TRACE})
CHILD_MODES = frozenset({COMPLETE, MEMCHECK, PAGES})
# Modes whose children run under compute-sanitizer memcheck, each test's end fenced in its output.
SANITIZED = frozenset({COMPLETE, MEMCHECK})
# The allocator placement each mode installs where its tests run (host/allocator.py).
# (trace installs none: its tests run on the CPU.)
PLACEMENT_OF = {COMPLETE: "exact", MARKERS: "markers", MEMCHECK: "exact", PAGES: "page_after", TRACE: None}
# Which detectors judge each mode's tests (their names as gpu_memsafety.model spells them; tests/test_host_judge.py
# checks the spelling).
DETECTORS_OF = {COMPLETE: ("memcheck", "guard"), MARKERS: ("guard",), MEMCHECK: ("memcheck",), PAGES: ("guard_page", "guard"),
                TRACE: ("trace",)}
# Modes that need a GPU, and what each runs on a machine without one instead: the bare flag sees everything it can
# (complete: the interpreter's trace, its own detectors said not to have run); a mode asked for by name runs as
# named or says it could not.
WITHOUT_GPU = {COMPLETE: TRACE}
NEEDS_GPU = frozenset({COMPLETE, MARKERS, MEMCHECK, PAGES})
# What a detector's line says when it ran on a test (the trace's counts are the evidence's).
RAN_WORDS = {"guard": "markers verified at teardown", "memcheck": "compute-sanitizer ran", "guard_page": "VMM guard pages",
             "trace": "{accesses:,} accesses of {launches} interpreted Triton launch(es) checked"}
# A detector of a mode that did not run on a test whose evidence lacks a field: (mode, detector) -> (the field, why,
# whether the evidence's detector notes say it better): complete's markers pass, the trace's interpreted launches.
RAN_IF = {(COMPLETE, "guard"): ("markers_checked", "the markers pass did not run this test", True),
          (TRACE, "trace"): ("launches", "the test ran no Triton kernel in Triton's interpreter", False)}
# The detector of marker bytes on a suite: the allocator shim's guards (markers mode, complete's markers pass) and the
# gpu_memsafety_guarded fixture's tensors (their own markers, checked at teardown, in any mode).
MARKERS_DETECTOR = "guard"
