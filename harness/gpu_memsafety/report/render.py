"""What every renderer shows, computed once from the document, and the base class the renderers share.

A renderer takes the JSON document, not CaseResult objects, so that a report loaded from disk (another
runner's, last night's) renders exactly like a fresh one. The facts a reader sees first (the headline:
what ran, what did not and why; known bugs grouped per kernel; cases not run grouped per reason) are built
here, so the terminal, Markdown and JUnit can never tell different stories. Everything is driven by the
data: an outcome or finding kind added to the model renders without a change here.

Text inside a report comes from kernels, adapters and files from other machines. `visible`
(gpu_memsafety.util.neutral, the one function for it) turns control characters (terminal escapes, NUL, carriage
returns, bidirectional overrides) into escapes a reader can see and breaks a line that would start a CI workflow
command; each renderer adds its own format's escaping on top.
"""
from __future__ import annotations

import abc
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

from gpu_memsafety.report.baselines import is_accepted, stale_entries
from gpu_memsafety.report.document import EMPTY, FAILED, INTERRUPTED, PASSED, outcome_ran, upstream_of
from gpu_memsafety.report.findings import case_findings, finding_signature
from gpu_memsafety.util.neutral import visible

# A reason quoted in a headline is cut here; the full text is in the section below it.
HEADLINE_REASON_CHARS = 80
# Distinct kinds of known-bug finding named on a kernel's one line before "and N more".
SIGNATURES_SHOWN = 2

def plural(n: int, word: str) -> str:
    if n != 1 and word.endswith("y") and word[-2:-1] not in "aeiou":
        return f"{n:,} {word[:-1]}ies"
    return f"{n:,} {word}{'' if n == 1 else 'es' if word.endswith('s') else 's'}"


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip_words(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut after a whole word where one ends in its second half."""
    if len(text) <= limit:
        return text
    head = text[: limit - 3]
    cut = head.rfind(" ")
    return (head[:cut] if cut > limit // 2 else head).rstrip(" ,;:(") + "..."


# ------------------------------------------------------------------------------------------- headline


@dataclass(frozen=True)
class Headline:
    status: str       # the summary status (passed, failed, empty, interrupted)
    word: str         # how it is said: "passed", "FAILED", "checked nothing", "interrupted", "did not finish"
    text: str         # "passed: 57 ran, 95 not run (needs a CUDA GPU; found none)"
    detail: str = ""  # a second line where there is one: why the run was interrupted
    partial: bool = False  # passed, but part of the matrix, or of its detectors, did not run: never said as a plain pass


_WORDS = {PASSED: "passed", FAILED: "FAILED", EMPTY: "checked nothing", INTERRUPTED: "interrupted"}


def headline(report: Mapping[str, Any]) -> Headline:
    """What ran, what did not and why, in one line; recomputed from the cases, never read from the summary."""
    cases, run = report["cases"], report["run"]
    status = report["summary"]["status"]
    never_ran = report.get("not_run", [])
    ran = sum(1 for c in cases if outcome_ran(c["outcome"]))
    failed = sum(1 for c in cases if c["failed"] and outcome_ran(c["outcome"]))
    skipped = len(cases) - ran
    if status == INTERRUPTED and not run["finished"] and not cases:
        return Headline(status, "did not finish", f"did not finish: run {run.get('id', '?')} started "
                        f"{run['started']} and wrote no results (still running, or killed)", str(run.get("interrupted") or ""))
    word = _WORDS.get(status, status)
    partial = status == PASSED and any(_partial(c) for c in cases)
    if partial:
        word = "passed, partial"
    parts = [f"{ran:,} of {ran + skipped + len(never_ran):,} cases ran" if status == INTERRUPTED
             else f"{ran:,} ran"]
    if failed:
        parts.append(f"{failed:,} failed")
    if never_ran:
        parts.append(f"{len(never_ran):,} never started")
    parts += _not_run_parts(not_run_groups(cases))
    parts += _partial_parts(cases)
    return Headline(status, word, f"{word}: {', '.join(parts)}",
                    str(run.get("interrupted") or "") if status == INTERRUPTED else "", partial)


def _partial(case: Mapping[str, Any]) -> bool:
    """Part of the run did not run for this case: the case could not run here and that was accepted (no GPU,
    --gpu-memsafety-allow-unsupported), or some of its detectors could not (details.partial: memcheck without a GPU)."""
    return case["outcome"] == "unsupported" or bool((case.get("details") or {}).get("partial"))


def _partial_parts(cases: Sequence[Mapping[str, Any]]) -> list[str]:
    """'memcheck did not run on 57 (needs a CUDA GPU; found none)', one part per detector a case ran without."""
    by_detector: dict[str, list[str]] = {}
    for case in cases:
        for detector, why in ((case.get("details") or {}).get("partial") or {}).items():
            by_detector.setdefault(detector, []).append(str(why))
    # detectors that did not run on as many cases for the same reason (no GPU: memcheck and the markers) are said once
    said: dict[tuple[int, str], list[str]] = {}
    for detector, whys in by_detector.items():
        said.setdefault((len(whys), whys[0]), []).append(detector)
    return [f"{' and '.join(detectors)} did not run on {n:,} ({clip_words(why, HEADLINE_REASON_CHARS)})"
            for (n, why), detectors in said.items()]


def _not_run_parts(groups: Sequence["NotRunGroup"]) -> list[str]:
    """'95 not run (reason)' for accepted skips; a not-run outcome that fails says its own name:
    '95 could not run (reason)', so the failures it adds are not counted twice under another word."""
    by_phrase: dict[str, list[NotRunGroup]] = {}
    for group in groups:
        by_phrase.setdefault(group.outcome if group.failed else "not run", []).append(group)
    return [f"{sum(len(g.ids) for g in members):,} {phrase} ({_reasons_text(members)})"
            for phrase, members in by_phrase.items()]


def _reasons_text(groups: Sequence["NotRunGroup"]) -> str:
    reasons = {g.reason for g in groups}
    if len(reasons) == 1:
        return clip_words(next(iter(reasons)), HEADLINE_REASON_CHARS)
    return f"{len(reasons)} reasons, listed below"


# pytest's words for the outcomes (the plugin maps them so): a known bug is pytest's strict xfail. A host suite's
# tests keep their own results (any of pytest's words) and a failing verdict fails the test (pytest_words).
PYTEST_WORDS = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


def pytest_word(case: Mapping[str, Any]) -> str:
    if case["failed"]:
        return "failed"
    if not outcome_ran(case["outcome"]):
        return "skipped"
    return "xfailed" if case["outcome"] == "expected finding" else "passed"


def pytest_words(case: Mapping[str, Any]) -> list[str]:
    """What pytest counts for one case: a scenario case's mapped outcome (pytest_word); for a test of a host suite
    (its own result in details["test"]), that result, unless the verdict fails it: then one "failed" (the plugin
    fails its call report; one that never got to its call stays an error). Each test is counted once."""
    own = (case.get("details") or {}).get("test")
    if isinstance(own, Mapping) and own.get("outcome") in PYTEST_WORDS:
        if case["failed"]:
            return ["error" if own["outcome"] == "error" else "failed"]
        return [str(own["outcome"])]
    return [pytest_word(case)]


def pytest_counts(cases: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What pytest's own summary line says for these cases: {'passed': 1, 'skipped': 5, 'xfailed': 2}."""
    counts = Counter(word for c in cases for word in pytest_words(c))
    return {word: counts[word] for word in PYTEST_WORDS if counts[word]}


# ------------------------------------------------------------------------------------- case groups


@dataclass
class NotRunGroup:
    """Cases not checked for one reason (a CPU-only machine has one reason for a hundred cases)."""

    outcome: str
    reason: str
    failed: bool = False      # a not-run outcome that fails the run (e.g. "could not run" on a GPU machine)
    ids: list[str] = field(default_factory=list)
    archs: list[str] = field(default_factory=list)


def not_run_groups(cases: Sequence[Mapping[str, Any]]) -> list[NotRunGroup]:
    groups: dict[tuple[str, str], NotRunGroup] = {}
    for case in cases:
        if outcome_ran(case["outcome"]):
            continue
        reason = first_line(case["message"]) or "no reason given"
        group = groups.setdefault((case["outcome"], reason), NotRunGroup(case["outcome"], reason, bool(case.get("failed"))))
        group.ids.append(case["id"])
        if case["arch"] and case["arch"] not in group.archs:
            group.archs.append(case["arch"])
    return list(groups.values())


@dataclass
class KnownBugGroup:
    """The expected findings (known bugs) of one kernel: one line in the terminal, one row in Markdown."""

    kernel: str
    cases: list[Mapping[str, Any]] = field(default_factory=list)
    archs: list[str] = field(default_factory=list)
    upstreams: list[str] = field(default_factory=list)
    signatures: Counter[str] = field(default_factory=Counter)
    bytes_by_signature: dict[str, list[int]] = field(default_factory=dict)

    @property
    def findings(self) -> int:
        return sum(self.signatures.values())

    def what(self) -> str:
        """'memcheck overread of w_scale past_end (44x, 64 B each)', the most frequent kinds first."""
        shown = [f"{sig} ({n}x, {_bytes_text(self.bytes_by_signature[sig])})"
                 for sig, n in self.signatures.most_common(SIGNATURES_SHOWN)]
        hidden = len(self.signatures) - SIGNATURES_SHOWN
        return "; ".join(shown) + (f"; and {plural(hidden, 'more kind')}" if hidden > 0 else "")


def _bytes_text(sizes: Sequence[int]) -> str:
    low, high = min(sizes), max(sizes)
    if low == high:
        return f"{low:,} B" + (" each" if len(sizes) > 1 else "")
    return f"{low:,}..{high:,} B"


def known_bug_groups(cases: Sequence[Mapping[str, Any]]) -> list[KnownBugGroup]:
    groups: dict[str, KnownBugGroup] = {}
    for case in cases:
        if case["outcome"] != "expected finding" or is_accepted(case):   # a baseline's: listed as accepted
            continue
        group = groups.setdefault(case["kernel"], KnownBugGroup(case["kernel"]))
        group.cases.append(case)
        if case["arch"] and case["arch"] not in group.archs:
            group.archs.append(case["arch"])
        upstream = upstream_of(case)
        if upstream and upstream not in group.upstreams:
            group.upstreams.append(upstream)
        for finding in case_findings(case):
            signature = finding_signature(finding)
            group.signatures[signature] += 1
            group.bytes_by_signature.setdefault(signature, []).append(finding.bytes)
    return [groups[k] for k in sorted(groups)]


def failing_cases(cases: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [c for c in cases if c["failed"]]


def accepted_cases(cases: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Cases that pass because a baseline accepted their findings (shown as "accepted: <reason>")."""
    return [c for c in cases if is_accepted(c)]


# ------------------------------------------------------------------------------------------- matrix


def row_kinds(row: Mapping[str, Any]) -> dict[str, Mapping[str, int]]:
    """A matrix row's totals per finding kind (rows from before `kinds` carry only the two classic ones)."""
    kinds = row.get("kinds")
    if isinstance(kinds, dict):
        return {"overread": row["overreads"], "overwrite": row["overwrites"], **kinds}
    return {"overread": row["overreads"], "overwrite": row["overwrites"]}


def matrix_kinds(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Columns: overreads and overwrites always, then every other kind any row has."""
    kinds = ["overread", "overwrite"]
    for row in rows:
        kinds += [k for k in row_kinds(row) if k not in kinds]
    return kinds


# Column names of the two kinds every report has (as the first reports named them); other kinds by their name.
_KIND_HEADS = {"overread": "overreads", "overwrite": "overwrites"}


def kind_head(kind: str) -> str:
    return _KIND_HEADS.get(kind, kind)


def kind_count(kind: str, n: int) -> str:
    """'3 overreads', '1 race', '2 uninit_read': a count of findings of one kind."""
    return plural(n, kind) if kind in _KIND_HEADS else f"{n:,} {kind}"


def matrix_head(kinds: Sequence[str], first: str = "kernel") -> tuple[str, ...]:
    return (first, "arch", "cases", "failed", *(kind_head(k) for k in kinds), "bytes", "verdict")


def row_label(report: Mapping[str, Any]) -> str:
    """What the matrix's first column holds: a scenario run's kernels, a host suite's test files
    (`pytest --gpu-memsafety`: run.suite)."""
    return "test file" if isinstance(report.get("run", {}).get("suite"), Mapping) else "kernel"


def matrix_cells(row: Mapping[str, Any], kinds: Sequence[str]) -> tuple[str, ...]:
    """Text cells of a row (kernel and arch unescaped; '-' for an empty name), the verdict as stored."""
    totals = row_kinds(row)
    empty = {"findings": 0, "bytes": 0}
    return (row["kernel"] or "-", row["arch"] or "-", f"{row['cases']:,}", f"{row['failed']:,}",
            *(f"{totals.get(k, empty)['findings']:,}" for k in kinds),
            f"{sum(t['bytes'] for t in totals.values()):,}", row["verdict"])


# ----------------------------------------------------------------------------------------- environment


def env_text(value: Any) -> str:
    """An environment value as short text: lists joined, objects as `key value` pairs."""
    if isinstance(value, list):
        return ", ".join(env_text(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {env_text(v)}" for k, v in value.items())
    return "" if value is None else str(value)


def gpus_text(gpus: Any) -> str:
    """'2x NVIDIA H200 (sm_90, 140 GiB)' from the environment's GPU records; 'none' for an empty list."""
    if not isinstance(gpus, list):
        return env_text(gpus)
    if not gpus:
        return "none"
    counts: Counter[str] = Counter(_gpu_text(g) for g in gpus)
    return ", ".join(f"{n}x {text}" if n > 1 else text for text, n in counts.items())


def _gpu_text(gpu: Any) -> str:
    if not isinstance(gpu, dict):
        return env_text(gpu)
    extras = [str(gpu["arch"])] if gpu.get("arch") else []
    if isinstance(gpu.get("memory_mib"), int) and not isinstance(gpu.get("memory_mib"), bool):
        extras.append(f"{round(gpu['memory_mib'] / 1024)} GiB")
    name = str(gpu.get("name") or "unnamed GPU")
    return f"{name} ({', '.join(extras)})" if extras else name


def sanitizer_text(sanitizer: Any) -> str:
    """compute-sanitizer as one short value: its version (and path), or 'not found'; never the search list."""
    if not isinstance(sanitizer, dict):
        return env_text(sanitizer)
    if not sanitizer.get("path"):
        rejected = sanitizer.get("rejected")
        if isinstance(rejected, list) and rejected and isinstance(rejected[0], dict):
            return f"found but rejected: {rejected[0].get('path')}: {rejected[0].get('problem')}" + (
                f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else "")
        return "not found"
    version = str(sanitizer.get("version") or "version unknown")
    return f"{version} ({sanitizer['path']})"


def sanitizer_searched(sanitizer: Any) -> list[str]:
    """The places searched for a compute-sanitizer that was not found, each once, in search order."""
    if not isinstance(sanitizer, dict) or sanitizer.get("path") or not isinstance(sanitizer.get("searched"), list):
        return []
    return list(dict.fromkeys(str(p) for p in sanitizer["searched"]))


def environment_pairs(environment: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every environment entry as (key, short text): GPUs and compute-sanitizer readable, the rest as is."""
    special = {"gpus": gpus_text, "compute_sanitizer": sanitizer_text}
    return [(str(k), special.get(str(k), env_text)(v)) for k, v in environment.items()]


# ------------------------------------------------------------------------------------------- the base


class Renderer(abc.ABC):
    """One output format of a report document. `filename` is where write_reports puts it ('' = not a file)."""

    name: ClassVar[str]
    filename: ClassVar[str] = ""

    @abc.abstractmethod
    def render(self, report: Mapping[str, Any]) -> str:
        """The whole document in this format."""

    @abc.abstractmethod
    def text(self, value: str) -> str:
        """Foreign text made safe for this format."""

    # What every format shows, decided here once; a renderer only lays it out in its own format.
    head = staticmethod(headline)
    failing = staticmethod(failing_cases)
    bug_groups = staticmethod(known_bug_groups)
    skip_groups = staticmethod(not_run_groups)
    accepted = staticmethod(accepted_cases)
    stale = staticmethod(stale_entries)

    @staticmethod
    def matrix_table(rows: Sequence[Mapping[str, Any]], first: str = "kernel") -> tuple[tuple[str, ...], list[MatrixLine]]:
        """The matrix's head and, per row, its text cells, its verdict and why it ran nothing ("" if it ran)."""
        kinds = matrix_kinds(rows)
        lines = []
        for row in rows:
            *cells, verdict = matrix_cells(row, kinds)
            lines.append(MatrixLine(tuple(cells), verdict, str(row.get("reason") or "")))
        return matrix_head(kinds, first), lines


@dataclass(frozen=True)
class MatrixLine:
    cells: tuple[str, ...]      # kernel, arch (unescaped), counts
    verdict: str
    reason: str
