"""The host path's face on the one decision: one test of a pytest suite (`pytest --gpu-memsafety`) judged by
gpu_memsafety.judge.decide.decide, with the test's own inputs (its own outcome, its gpu_memsafety marker: known bugs,
the off switch). The rules themselves are gpu_memsafety.judge.suite's; this module gathers what they read: the
allocator markers' findings on the test's allocations, and an error of the harness itself as that test's evidence.
"""
from __future__ import annotations

from typing import Callable

from gpu_memsafety.host.allocations import marker_findings
from gpu_memsafety.host.evidence import Evidence
from gpu_memsafety.judge.decide import decide
from gpu_memsafety.judge.suite import OwnResult, TestEvidence, TestMarker
from gpu_memsafety.model import CaseResult


def suite_evidence(ev: Evidence, own: OwnResult, marker: TestMarker | None = None) -> TestEvidence:
    """One test's evidence as the decision reads it: what the detectors saw, the allocator markers' findings on its
    allocations (by the tensors of its launches), its own outcome, its marker."""
    return TestEvidence(ev, own, marker or TestMarker(), tuple(marker_findings(ev.hits, ev.test, ev.arch, ev.tensors)))




def judge_safely(make_evidence: Callable[[], Evidence], own: OwnResult, make_marker: Callable[[], TestMarker | None],
                 test: str, mode: str, arch: str = "") -> CaseResult:
    """decide() on one test's evidence, where an error of the harness itself while gathering or judging it is that
    test's `unresolved` verdict, naming the error, instead of a pytest INTERNALERROR that ends the whole run
    unreported. A gpu_memsafety marker that cannot be read stays its own usage error (MarkerError), raised to the
    caller."""
    marker = make_marker()
    try:
        return decide(suite_evidence(make_evidence(), own, marker))
    except Exception as exc:                           # noqa: BLE001 - every harness error becomes a visible verdict
        import traceback
        from gpu_memsafety.util.neutral import visible
        where = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
        problem = (f"gpu-memsafety could not judge this test: {type(exc).__name__}: "
                   f"{visible(str(exc), newlines=False)} (an error of the harness, not of the test; the run went on)")
        return decide(TestEvidence(Evidence(test, mode, arch, detector_problem=problem), own, marker or TestMarker(),
                                   harness_error=(problem, where)))
