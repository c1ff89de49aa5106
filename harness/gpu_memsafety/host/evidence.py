"""What one test of a host suite left behind, as typed data: its own result and what the detectors saw.

It crosses a process boundary in the memcheck and pages modes (a sanitized or paged child runs the tests and the
parent judges them), so every type here round-trips through JSON. Pure: no torch, no pytest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from gpu_memsafety.host.breaks import Seen
from gpu_memsafety.judge.suite import ERROR, FAILED, PASSED, SKIPPED, XFAILED, XPASSED, OwnResult
from gpu_memsafety.host.launches import TensorUse
from gpu_memsafety.model import Finding
from gpu_memsafety.host.allocator import Allocation, GuardHit

def own_result(phases: Mapping[str, tuple[str, str, bool]], duration_s: float = 0.0) -> OwnResult:
    """pytest's verdict from its phase reports: when -> (outcome, first line of its text, xfail-marked).

    As pytest counts: a failed setup or teardown is an error, a failed call a failure; a skip in any phase a skip;
    an xfail-marked call that failed is xfailed, one that passed (non-strict) xpassed."""
    for when in ("setup", "call", "teardown"):
        outcome, text, wasxfail = phases.get(when, ("passed", "", False))
        if outcome == "failed":
            return OwnResult(ERROR if when != "call" else FAILED, text, duration_s)
        if outcome == "skipped":
            return OwnResult(XFAILED if wasxfail else SKIPPED, text, duration_s)
    if phases.get("call", ("", "", False))[2]:
        return OwnResult(XPASSED, phases["call"][1], duration_s)
    return OwnResult(PASSED, "", duration_s)


@dataclass
class Evidence:
    """What the detectors saw of one test (judge.suite.TestSeen's shape; gpu_memsafety.host.judge hands it to the
    decision)."""

    test: str
    mode: str
    arch: str = ""
    hits: list[GuardHit] = field(default_factory=list)           # markers: blocks whose guards changed
    hits_truncated: int = 0
    findings: list[Finding] = field(default_factory=list)        # memcheck / pages findings, already attributed
    detector_problem: str = ""   # the detector ran but cannot be trusted (sanitizer truncated, ...)
    breaks: list[Seen] = field(default_factory=list)
    unavailable: str = ""        # the mode could not run here (no GPU, allocator not installed): why
    missing: bool = False        # ... on a machine where it should have (a GPU is there): a failure, not a skip
    context_lost: str = ""       # the CUDA context was lost during this test (a fault, a sticky error)
    earlier_loss: str = ""       # the context was lost before this test: it ran in a dead process
    guarded_blocks: int = 0      # blocks checked at its end (live, and freed during it)
    allocated: int = 0           # allocations it made
    guard_off: str = ""          # the test's gpu_memsafety marker turned guarding off: why
    crashed: str = ""            # its process died while it ran (children): how
    tensors: list[TensorUse] = field(default_factory=list)   # its Triton launches' tensor arguments, by name
    markers_checked: bool = False   # complete mode: its markers pass finished it (hits are that pass's)
    detector_notes: list[str] = field(default_factory=list)  # what a pass could not do, said in the verdict
    # The gpu_memsafety_guarded fixture's own check at the test's teardown (any device, a CPU too): how many guarded
    # tensors it checked, and what changed. Independent of the mode's allocator, so it counts where that cannot run.
    fixture_checked: int = 0
    fixture_findings: list[Finding] = field(default_factory=list)
    # trace mode (no GPU): the test's Triton launches run by the interpreter, and the accesses of theirs checked
    launches: int = 0
    accesses: int = 0
    unfinished: list[str] = field(default_factory=list)     # ... those that raised before they finished: what
    # detectors of the mode asked for that could not run here (complete without a GPU: memcheck, guard): why
    partial: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"test": self.test, "mode": self.mode, "arch": self.arch,
                "hits": [{"allocation": h.allocation.to_json(), "front": h.front.hex(), "back": h.back.hex(),
                          "live": h.live} for h in self.hits],
                "hits_truncated": self.hits_truncated, "findings": [f.to_json() for f in self.findings],
                "detector_problem": self.detector_problem, "breaks": [b.to_json() for b in self.breaks],
                "unavailable": self.unavailable, "missing": self.missing, "context_lost": self.context_lost, "earlier_loss": self.earlier_loss,
                "guarded_blocks": self.guarded_blocks, "allocated": self.allocated, "guard_off": self.guard_off,
                "crashed": self.crashed, "tensors": [t.to_json() for t in self.tensors],
                "markers_checked": self.markers_checked, "detector_notes": list(self.detector_notes),
                "fixture_checked": self.fixture_checked,
                "fixture_findings": [f.to_json() for f in self.fixture_findings],
                "launches": self.launches, "accesses": self.accesses, "unfinished": list(self.unfinished),
                "partial": dict(self.partial)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Evidence":
        hits = [GuardHit(Allocation.from_json(h["allocation"]), bytes.fromhex(h["front"]), bytes.fromhex(h["back"]),
                         bool(h["live"])) for h in data.get("hits", ())]
        return cls(test=str(data["test"]), mode=str(data["mode"]), arch=str(data.get("arch", "")), hits=hits,
                   hits_truncated=int(data.get("hits_truncated", 0)),
                   findings=[Finding.from_json(f) for f in data.get("findings", ())],
                   detector_problem=str(data.get("detector_problem", "")),
                   breaks=[Seen.from_json(b) for b in data.get("breaks", ())],
                   unavailable=str(data.get("unavailable", "")), missing=bool(data.get("missing", False)),
                   context_lost=str(data.get("context_lost", "")),
                   earlier_loss=str(data.get("earlier_loss", "")), guarded_blocks=int(data.get("guarded_blocks", 0)),
                   allocated=int(data.get("allocated", 0)), guard_off=str(data.get("guard_off", "")),
                   crashed=str(data.get("crashed", "")),
                   tensors=[TensorUse.from_json(t) for t in data.get("tensors", ())],
                   markers_checked=bool(data.get("markers_checked", False)),
                   detector_notes=[str(n) for n in data.get("detector_notes", ())],
                   fixture_checked=int(data.get("fixture_checked", 0)),
                   fixture_findings=[Finding.from_json(f) for f in data.get("fixture_findings", ())],
                   launches=int(data.get("launches", 0)), accesses=int(data.get("accesses", 0)),
                   unfinished=[str(u) for u in data.get("unfinished", ())],
                   partial={str(k): str(v) for k, v in (data.get("partial") or {}).items()})


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def sites(stack: Sequence[Any]) -> list[str]:
    return [f"{getattr(f, 'file', '')}:{getattr(f, 'line', '')}" for f in stack]
