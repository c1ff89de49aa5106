"""`fake_reports`: a CPU stand-in whose `stray` case has findings no expectation covers (a run that fails), for
the report formats and the baseline workflow (tests/report/test_report_workflow.py). The adapter is
tests/helpers/fake_kernels/fake_report_adapters.py."""
from __future__ import annotations

from gpu_memsafety.model import Expectation
from gpu_memsafety.scenario.definition import Case

from _fake import fake_scenario

VARIANTS = ("clean", "stray")


def _describe(case: Case, name: str, start: int, end: int) -> str:
    """The scenario's words for bytes of a buffer: which token row and which scale bytes."""
    if name != "scale":
        return f"out bytes {start}..{end - 1}"
    row, col = divmod(start, 32)
    return f"token {row}, scale bytes {col}..{col + (end - start) - 1}"


SCENARIO = fake_scenario("fake_reports", "stray writes no expectation covers (report tests only)",
                         "fake_report_adapters:run_case", VARIANTS, lambda case: Expectation(), n=64,
                         kernel="fake_store", describe=_describe)
