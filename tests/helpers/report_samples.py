"""Reports the format tests render: reports of earlier H200 runs (tests/data/reports/, gzip-compressed; the runs'
full outputs are on the evidence-archive branch, their summaries under results/h200/), and one built here that has
every kind of case a format must show (a failure with a kernel source line, one with none, an unexpectedly
clean case, a known bug, a baseline-accepted case, a case not run, a stale baseline entry) and hostile text."""
from __future__ import annotations

import atexit
import gzip
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, OVERWRITE, ByteRange, CaseResult, DetectorRun, Finding, Outcome
from gpu_memsafety.placement.layout import Rows, plan
from gpu_memsafety.report import build_report
from repo_paths import DATA, ROOT

REPORTS = DATA / "reports"
_UNPACKED = Path(tempfile.mkdtemp(prefix="gpu-memsafety-samples-"))
atexit.register(shutil.rmtree, _UNPACKED, True)


def unpacked(name: str) -> Path:
    """tests/data/reports/NAME.report.json.gz as a plain report.json (in a folder named NAME) under a temporary
    folder, as the harness writes it."""
    target = _UNPACKED / name / "report.json"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(gzip.decompress((REPORTS / f"{name}.report.json.gz").read_bytes()))
    return target


# The default matrix on the H200 (350 cases, 78 known bugs), the last-expert sweep, the real upstream kernels.
MATRIX = unpacked("run15-cover-matrix-matrix-all")
LAST_EXPERT = unpacked("run3-last-expert-sanitize-last-expert")
UPSTREAM = unpacked("run9-upstream-real-kernels-padded-stride-sglang")
PACKAGE_MATRIX = unpacked("run18-package-matrix-matrix")   # after the package move
EVIDENCE_REPORTS = (MATRIX, LAST_EXPERT, UPSTREAM, PACKAGE_MATRIX)

RUN_ROOT = "/runner/work/kernels"
HOSTILE = "evil\x1b[31m <script>alert(1)</script> [x](http://e.test) %0A::error::x, a:b\u202e"
ROWS = Rows(rows=8, row_bytes=24, row_stride=32, used_rows=5)
SCALE_LAYOUT = plan(8 * 32, rows=ROWS)
W_SCALE_LAYOUT = plan(4096, placement="exact")


def padding_overwrite() -> Finding:
    return Finding(GUARD, OVERWRITE, "scale", "row_padding", 4, 1, kernel="store_k", arch="sm_90",
                   ranges=(ByteRange("row_padding[row 2]", 88, 92, "token 2, scale bytes 24..27"),),
                   details={"access": "write", "zone": "padding"})


def past_end_overread(kernel: str = "matmul_k") -> Finding:
    return Finding(MEMCHECK, OVERREAD, "w_scale", "past_end", 64, 64, kernel=kernel, arch="sm_90",
                   ranges=(ByteRange("past_end", 4096, 4160, "expert 3, k group 90..91"),), first_thread="(1,0,0)",
                   first_block="(7,0,0)", source="matmul.py:371",
                   details={"access": "read", "path": f"{RUN_ROOT}/kernels/matmul.py", "zone": "past_allocation"})


def _case(case_id: str, outcome: Outcome, findings: list[Finding], *, message: str = "", expected: str = "clean",
          details: dict[str, Any] | None = None, arch: str = "sm_90", kernel: str = "store_k") -> CaseResult:
    scenario, _, rest = case_id.partition("[")
    return CaseResult(case_id=case_id, scenario=scenario, variant=rest.split("-")[0], params={
        "n": 4, "upstream": "triton_kernels from sgl-kernel 0.3.21"}, kernel=kernel, arch=arch, mode="both",
        outcome=outcome, expected=expected, findings=findings,
        detectors=[DetectorRun(GUARD, True, "markers verified"), DetectorRun(MEMCHECK, True, "compute-sanitizer")],
        message=message or outcome.label, duration_s=1.5, details=details or {})


def sample_report(*, hostile: bool = False) -> dict[str, Any]:
    """A report with a case of every kind the formats show; `hostile` puts control characters, markup and
    workflow-command text into the kernel names, messages and reasons."""
    evil = HOSTILE if hostile else ""
    scale = {"layout": SCALE_LAYOUT.to_json(), "first": "token 0, scale bytes 0..0", "last": "token 7, scale bytes 31..31"}
    w_scale = {"layout": W_SCALE_LAYOUT.to_json(), "first": "expert 0", "last": "expert 3"}
    results = [
        _case("stray_store[bad-n4]", Outcome.FINDING, [padding_overwrite()], message=f"unexpected: padding{evil}",
              details={"buffers": {"scale": scale}}),
        _case("oob_read[tail-K2880]", Outcome.FINDING, [past_end_overread(f"matmul_k{evil}")],
              message="unexpected: past end", details={"buffers": {"w_scale": w_scale}}, kernel="matmul_k"),
        _case("oob_read[gone-K2880]", Outcome.UNEXPECTEDLY_CLEAN, [], expected="overread of w_scale/past_end",
              message="expected but not seen: overread of w_scale/past_end (upstream triton-lang/triton#10772)",
              kernel="matmul_k"),
        _case("oob_read[known-K2880]", Outcome.EXPECTED_FINDING, [past_end_overread()], kernel="matmul_k",
              expected="overread of w_scale/past_end (upstream triton-lang/triton#10772)",
              details={"buffers": {"w_scale": w_scale}}),
        _case("stray_store[accepted-n4]", Outcome.EXPECTED_FINDING, [padding_overwrite()],
              message="accepted by baseline: unexpected: padding", details={
                  "buffers": {"scale": scale},
                  "baseline": [{"finding": padding_overwrite().key(), "reason": f"fix pending{evil}",
                                "upstream": "sgl-project/sglang#1"}]}),
        _case("oob_read[sm80-K2880]", Outcome.NOT_APPLICABLE, [], message="runs on sm_90 only", arch=""),
    ]
    stale = [{"case": "stray_store[removed-n4]", "finding": padding_overwrite().key(), "reason": "old",
              "upstream": "", "why": "no such case any more"}]
    run_extra = {
        "root": RUN_ROOT,
        "scenarios": {"stray_store": {"file": "scenarios/stray_store.py", "line": 40},
                      "oob_read": {"file": "scenarios/oob_read.py", "line": 12}},
        "baseline": {"file": "memsafety-baseline.json", "entries": 2, "accepted": 1, "stale": stale, "unchecked": []},
    }
    return build_report(results, {"hostname": "h200-1", "archs": ["sm_90"]}, started="2026-12-01T03:00:00Z",
                        finished="2026-12-01T03:20:00Z", argv=["make", "sanitize"], run_id="20261201T030000Z-0a1b2c3d",
                        run_extra=run_extra)
