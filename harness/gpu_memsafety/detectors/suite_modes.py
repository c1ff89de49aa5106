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
           "(TRITON_INTERPRET=1, set by the plugin unless the suite set it) checked against guarded copies of their tensor arguments (reads and "
           "writes, exact bytes; what complete runs on a machine without a GPU)",
}
# One vocabulary (docs/modes-and-detectors.md, "Two kinds of run"): each test-suite mode and the scenario mode
# (`--gpu-memsafety-mode`, detectors/modes.py) that runs the same detectors; None where scenarios have no mode of their
# own for it. A mode word of the other kind is a usage error that names this counterpart.
SCENARIO_MODE_OF = {COMPLETE: "complete", MARKERS: "guard", MEMCHECK: "memcheck", PAGES: "guard_page", TRACE: None}
SUITE_OPTION, SCENARIO_OPTION = "--gpu-memsafety", "--gpu-memsafety-mode"


def other_kind(word: str, scenario_modes: "list[str] | tuple[str, ...]", *, for_suite: bool) -> str:
    """The usage error's words for a mode of the other kind ("" when `word` is a mode of neither)."""
    suite_of = {scenario: suite for suite, scenario in SCENARIO_MODE_OF.items() if scenario}
    if for_suite and word in scenario_modes:
        same = suite_of.get(word)
        instead = (f"for a test suite the same is {SUITE_OPTION}={same}" if same else
                   "test suites have no such mode")
        return (f"{word!r} is a scenario mode ({SCENARIO_OPTION} {word}, for scenario runs); {instead}")
    if not for_suite and word in MODES:
        same = SCENARIO_MODE_OF.get(word)
        instead = (f"for scenarios the same is {SCENARIO_OPTION} {same}" if same else
                   "scenario runs have it inside `both` and `complete`, without a GPU")
        return f"{word!r} is a test-suite mode ({SUITE_OPTION}={word}, guarding a pytest suite); {instead}"
    return ""


# Modes whose tests run in the process pytest runs (the others run them in child processes).
IN_PROCESS = frozenset({MARKERS, TRACE})
CHILD_MODES = frozenset({COMPLETE, MEMCHECK, PAGES})
# Modes whose children run under compute-sanitizer memcheck, each test's end fenced in its output.
SANITIZED = frozenset({COMPLETE, MEMCHECK})
# The allocator placement each mode installs where its tests run (host/allocator.py).
# (trace installs none: its tests run on the CPU.)
PLACEMENT_OF = {COMPLETE: "exact", MARKERS: "markers", MEMCHECK: "exact", PAGES: "page_after", TRACE: None}
# Which detectors judge each mode's tests (their names as gpu_memsafety.model spells them; tests/host/test_host_judge.py
# checks the spelling).
DETECTORS_OF = {COMPLETE: ("memcheck", "guard"), MARKERS: ("guard",), MEMCHECK: ("memcheck",), PAGES: ("guard_page", "guard"),
                TRACE: ("trace", "trace_race")}
# Modes that need a GPU, and what each runs on a machine without one instead: the bare flag sees everything it can
# (complete: the interpreter's trace, its own detectors said not to have run); a mode asked for by name runs as
# named or says it could not.
WITHOUT_GPU = {COMPLETE: TRACE}
NEEDS_GPU = frozenset({COMPLETE, MARKERS, MEMCHECK, PAGES})
# What a detector's line says when it ran on a test (the trace's counts are the evidence's).
RAN_WORDS = {"guard": "markers verified at teardown", "memcheck": "compute-sanitizer ran", "guard_page": "VMM guard pages",
             "trace": "{accesses:,} accesses of {launches} interpreted Triton launch(es) checked",
             "trace_race": "races between the program instances of {launches} interpreted Triton launch(es) checked"}
# A detector of a mode that did not run on a test whose evidence lacks a field: (mode, detector) -> (the field, why,
# whether the evidence's detector notes say it better): complete's markers pass, the trace's interpreted launches.
RAN_IF = {(COMPLETE, "guard"): ("markers_checked", "the markers pass did not run this test", True),
          (TRACE, "trace"): ("launches", "the test ran no Triton kernel in Triton's interpreter", False),
          (TRACE, "trace_race"): ("launches", "the test ran no Triton kernel in Triton's interpreter", False)}
# The detector of marker bytes on a suite: the allocator shim's guards (markers mode, complete's markers pass) and the
# gpu_memsafety_guarded fixture's tensors (their own markers, checked at teardown, in any mode).
MARKERS_DETECTOR = "guard"
