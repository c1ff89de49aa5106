"""The report document: what one run produced, built from CaseResults into `gpu-memsafety-report/1`.

Everything a reader shows (the headline, the kernel x architecture matrix, the counts) is a function of the
cases and of the run's own record (its id, whether it was interrupted, which cases never started), so the
summary and matrix stored in a file can always be recomputed from its cases and checked (gpu_memsafety.report.load)
or rebuilt (gpu_memsafety.report.merge), never trusted. The schema is published as docs/report.schema.json.
"""
from __future__ import annotations

import re
import secrets
import time
from dataclasses import fields
from typing import Any, Iterable, Mapping, Sequence, TypedDict

from gpu_memsafety import __version__
from gpu_memsafety.model import KINDS, ByteRange, CaseResult, DetectorRun, Finding, Outcome

REPORT_SCHEMA = "gpu-memsafety-report/1"

# Row verdicts, best first; a merged cell takes the worst of its rows, except that "not applicable" and
# "unsupported" only stand when nothing ran at all (an architecture where some cases ran is judged by those).
# "not applicable": every case of the row does not apply here (another architecture, a mode that cannot see its
# bug, a copy that needs a newer triton); "unsupported": some could not run and that was accepted. Either row
# carries the reason, its cases' own words.
OK, KNOWN_BUG, FAILURE, UNSUPPORTED = "ok", "known bug", "failure", "unsupported"
NOT_APPLICABLE = "not applicable"
VERDICTS = (NOT_APPLICABLE, UNSUPPORTED, OK, KNOWN_BUG, FAILURE)
# Reasons a not-run row names before "and N more".
REASONS_SHOWN = 2

# The report's own status: "empty" when no case was checked (none ran, or none could), because a run that
# checked nothing must never read as a pass; "interrupted" when the run stopped before every case had a
# result (a signal, a killed make), whatever the cases that did run say.
PASSED, FAILED, EMPTY, INTERRUPTED = "passed", "failed", "empty", "interrupted"
STATUSES = (PASSED, FAILED, EMPTY, INTERRUPTED)


class KindTotals(TypedDict):
    findings: int   # Finding records of this kind
    bytes: int      # sum of their distinct bytes
    accesses: int   # sum of their counts (sanitizer records or changed ranges)


class MatrixRow(TypedDict):
    kernel: str
    arch: str
    cases: int
    failed: int
    overreads: KindTotals
    overwrites: KindTotals
    kinds: dict[str, KindTotals]   # every finding kind present in the row (overreads/overwrites included)
    verdict: str
    reason: str                    # why nothing of the row ran ("" when something did)


def new_run_id(now: float | None = None) -> str:
    """A run id that sorts by start time and never repeats: 20261130T064500Z-1a2b3c4d."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(4)}"


def shard_record(index: int, count: int, group: str = "") -> dict[str, Any]:
    """run.shard: this report is shard `index` of `count` (1-based, as in `--gpu-memsafety-shard 2/4`) of run group `group`."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: the index must be between 1 and the count")
    record: dict[str, Any] = {"index": index, "count": count}
    if group:
        record["group"] = group
    return record


# --------------------------------------------------------------------------------------------- build


def build_report(
    results: list[CaseResult],
    environment: Mapping[str, Any],
    *,
    started: str,
    finished: str,
    argv: list[str],
    mode: str | None = None,
    run_id: str = "",
    interrupted: str = "",
    not_run: Sequence[str] = (),
    shard: Mapping[str, Any] | None = None,
    run_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report.json document of one run.

    `mode` defaults to the cases' modes joined with '+'. `interrupted` says why the run stopped early ("" when
    it ran to the end); `not_run` names the cases it collected but never ran. `shard` is a shard_record();
    `run_extra` is further run metadata (e.g. GPU placement) kept under `run` for readers that know it.
    """
    run: dict[str, Any] = dict(run_extra or {})
    run.update({
        "id": run_id or new_run_id(),
        "started": started,
        "finished": finished,
        "argv": list(argv),
        "mode": mode if mode is not None else run_mode(results),
        "harness_version": __version__,
        "interrupted": interrupted,
    })
    if shard is not None:
        run["shard"] = dict(shard)
    return {
        "schema": REPORT_SCHEMA,
        "environment": dict(environment),
        "run": run,
        "summary": summarize(results, not_run=not_run, interrupted=interrupted),
        "cases": [case_json(result) for result in results],
        "not_run": list(not_run),
        "matrix": matrix(results, runner_arch(environment)),
    }


def case_json(result: CaseResult) -> dict[str, Any]:
    """A case as report.json holds it: CaseResult.to_json() with each finding's baseline key (`key`, what a
    baseline entry names) written out, so a reader never has to rebuild it."""
    data = result.to_json()
    for finding, obj in zip(data["findings"], result.findings):
        finding["key"] = obj.key()
    return data


def run_mode(results: Iterable[CaseResult]) -> str:
    return "+".join(sorted({r.mode for r in results if r.mode}))


def summarize(results: Sequence[CaseResult], *, not_run: Sequence[str] = (),
              interrupted: str = "") -> dict[str, Any]:
    """Counts and status. `ran`: cases that were checked; `skipped`: cases with a result that says they were
    not (unsupported, ...); `not_run`: cases the run collected and never reached (it was interrupted)."""
    counts = {outcome.label: 0 for outcome in Outcome}
    for result in results:
        counts[result.outcome.label] += 1
    failed = sum(1 for r in results if r.failed)
    ran = sum(1 for r in results if outcome_ran(r.outcome))
    return {
        "total": len(results),
        "failed": failed,
        "counts": counts,
        "ran": ran,
        "skipped": len(results) - ran,
        "not_run": len(not_run),
        "status": run_status(failed=failed, ran=ran, interrupted=bool(interrupted or not_run)),
    }


def run_status(*, failed: int, ran: int, interrupted: bool) -> str:
    if interrupted:
        return INTERRUPTED
    return FAILED if failed else (PASSED if ran else EMPTY)


def unchecked_reasons(report: Mapping[str, Any], *, findings_judged: bool = False) -> list[str]:
    """Why a validated report cannot stand for a checked run, one sentence each (none: it can): it was
    interrupted, it checked nothing, or (with `findings_judged`: a judgement made on findings alone, such as a
    baseline check) a case failed without a finding, so no comparison of findings can say it passed. The one
    reading of a report's status that every command judging a report uses (baseline check and write, merge,
    history, render)."""
    results = cases_from_report(report)
    not_run = report.get("not_run", [])
    interrupted = str(report["run"].get("interrupted") or "")
    status = summarize(results, not_run=not_run, interrupted=interrupted)["status"]
    reasons = []
    if status == INTERRUPTED:
        reasons.append(f"the run was interrupted ({interrupted or 'cases never started'}): "
                       f"{len(not_run)} case(s) never started, so what was not seen is unknown")
    elif status == EMPTY:
        reasons.append("the run checked nothing: no case ran (every case was skipped, or none was collected)")
    if findings_judged:
        broken = [r for r in results if r.failed and r.outcome is not Outcome.FINDING]
        if broken:
            named = ", ".join(f"{r.case_id} ({r.outcome.label})" for r in broken[:5])
            more = f" and {len(broken) - 5} more" if len(broken) > 5 else ""
            reasons.append(f"{len(broken)} case(s) failed without a finding to compare: {named}{more}")
    return reasons


# Outcomes that mean the case was not checked at all (skipped with the reason). Labels, so that an outcome
# added to the model under one of these names ("not applicable", "could not run") is counted without a change.
NOT_RUN_LABELS = frozenset({"unsupported", "not applicable", "could not run"})


def outcome_ran(outcome: Outcome | str) -> bool:
    """Whether a case with this outcome was checked (it may still have failed: crashed, timeout, ...)."""
    label = outcome.label if isinstance(outcome, Outcome) else outcome
    return label not in NOT_RUN_LABELS


def matrix(results: Sequence[CaseResult], fallback_arch: str = "") -> list[MatrixRow]:
    """One row per (case kernel, case arch); findings count in the row of the case that produced them. A case
    without an architecture (decided before any process ran: not applicable, could not run) counts on
    `fallback_arch`, the runner's (runner_arch), so cases that did not run make no row of their own."""
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    for result in results:
        groups.setdefault((result.kernel, result.arch or fallback_arch), []).append(result)
    return [_matrix_row(kernel, arch, cases) for (kernel, arch), cases in sorted(groups.items())]


def runner_arch(environment: Mapping[str, Any]) -> str:
    """The one architecture of a runner (its environment's `archs`), or '' when it has several or none."""
    archs = environment.get("archs")
    if isinstance(archs, list) and len(archs) == 1 and isinstance(archs[0], str):
        return archs[0]
    return ""


def _matrix_row(kernel: str, arch: str, cases: Sequence[CaseResult]) -> MatrixRow:
    findings = [f for case in cases for f in case.findings]
    return {
        "kernel": kernel,
        "arch": arch,
        "cases": len(cases),
        "failed": sum(1 for c in cases if c.failed),
        "overreads": kind_totals(findings, "overread"),
        "overwrites": kind_totals(findings, "overwrite"),
        "kinds": {kind: kind_totals(findings, kind) for kind in finding_kinds(findings)},
        "verdict": row_verdict([c.outcome for c in cases]),
        "reason": row_reason(cases),
    }


def finding_kinds(findings: Iterable[Finding]) -> list[str]:
    """The kinds present, the model's own kinds first in their order, then any others sorted."""
    present = {f.kind for f in findings}
    return [k for k in KINDS if k in present] + sorted(present - set(KINDS))


def kind_totals(findings: Iterable[Finding], kind: str) -> KindTotals:
    chosen = [f for f in findings if f.kind == kind]
    return {
        "findings": len(chosen),
        "bytes": sum(f.bytes for f in chosen),
        "accesses": sum(f.count for f in chosen),
    }


def row_verdict(outcomes: Sequence[Outcome]) -> str:
    if any(o.is_failure for o in outcomes):
        return FAILURE
    if all(not outcome_ran(o) for o in outcomes):
        return NOT_APPLICABLE if all(o is Outcome.NOT_APPLICABLE for o in outcomes) else UNSUPPORTED
    if any(o is Outcome.EXPECTED_FINDING for o in outcomes):
        return KNOWN_BUG
    return OK


def row_reason(cases: Sequence[CaseResult]) -> str:
    """Why none of a row's cases ran: their reasons (each message's first line), each once; "" if one ran."""
    if any(outcome_ran(c.outcome) or c.outcome.is_failure for c in cases):
        return ""
    return join_reasons(c.message.strip().splitlines()[0] if c.message.strip() else c.outcome.label for c in cases)


def join_reasons(reasons: Iterable[str]) -> str:
    distinct = [r for r in dict.fromkeys(reasons) if r]
    more = f"; and {len(distinct) - REASONS_SHOWN} more" if len(distinct) > REASONS_SHOWN else ""
    return "; ".join(distinct[:REASONS_SHOWN]) + more


def worst_verdict(verdicts: Iterable[str]) -> str:
    """The verdict of several rows of one (kernel, arch): 'not applicable' or 'unsupported' only if every row is."""
    return max(verdicts, key=VERDICTS.index, default=UNSUPPORTED)


def upstream_of(case: Mapping[str, Any]) -> str:
    """The upstream issue of a case's expectation: details['upstream'], else '(upstream X)' in `expected`."""
    details = case.get("details")
    if isinstance(details, Mapping) and isinstance(details.get("upstream"), str):
        return str(details["upstream"])
    found = re.search(r"upstream ([^\s);]+)", str(case.get("expected", "")))
    return found.group(1) if found else ""


# ------------------------------------------------------------------------------------- back to objects


def cases_from_report(report: Mapping[str, Any]) -> list[CaseResult]:
    """The CaseResults of a validated report (for baselines, merging and re-rendering)."""
    return [case_from_json(case) for case in report["cases"]]


def case_from_json(case: Mapping[str, Any]) -> CaseResult:
    result = CaseResult.from_json({**case, "findings": [], "detectors": []})
    result.findings = [finding_from_json(f) for f in case["findings"]]
    result.detectors = [DetectorRun(d["detector"], d["ran"], d["detail"], bool(d.get("missing", False)))
                        for d in case["detectors"]]
    return result


def finding_from_json(data: Mapping[str, Any]) -> Finding:
    """Finding.from_json that ignores fields this version does not know (a newer writer's additions)."""
    known = {f.name for f in fields(Finding)}
    range_keys = {f.name for f in fields(ByteRange)}
    ranges = tuple(ByteRange(**{k: v for k, v in r.items() if k in range_keys}) for r in data["ranges"])
    return Finding(**{**{k: v for k, v in data.items() if k in known}, "ranges": ranges})
