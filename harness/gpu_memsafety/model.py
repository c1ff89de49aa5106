"""The result model: outcomes, findings, expectations and case results.

Pure data, shared by the worker (child process), the runner, the verdict rules and the reports.
It imports no torch, triton or CUDA so that all of it is tested on CPU from recorded data.
Everything here round-trips through JSON (`to_json` / `from_json`) because it crosses a process boundary.
"""
from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping


class Outcome(enum.Enum):
    """Closed set of case outcomes; each knows whether it fails the run (as in LLVM lit)."""

    CLEAN = ("clean", False)
    EXPECTED_FINDING = ("expected finding", False)
    FINDING = ("finding", True)
    UNEXPECTEDLY_CLEAN = ("unexpectedly clean", True)
    UNRESOLVED = ("unresolved", True)
    TIMEOUT = ("timeout", True)
    CRASHED = ("crashed", True)
    # Not run. A case that should have run on this machine and could not (no usable compute-sanitizer, a
    # detector that could not start, an adapter's Unsupported) is COULD_NOT_RUN on a machine with a GPU, a
    # failure; UNSUPPORTED where that is accepted (no GPU, or --gpu-memsafety-allow-unsupported). A case that does not apply
    # here (another architecture, a mode that cannot see its bug) is NOT_APPLICABLE. The last two are skips.
    COULD_NOT_RUN = ("could not run", True)
    UNSUPPORTED = ("unsupported", False)
    NOT_APPLICABLE = ("not applicable", False)

    def __init__(self, label: str, is_failure: bool) -> None:
        self.label = label
        self.is_failure = is_failure

    @property
    def skipped(self) -> bool:
        """Not run, and that is accepted: reported with the reason, never as a pass or a failure."""
        return self in (Outcome.UNSUPPORTED, Outcome.NOT_APPLICABLE)

    @classmethod
    def from_label(cls, label: str) -> "Outcome":
        for member in cls:
            if member.label == label:
                return member
        raise ValueError(f"unknown outcome {label!r}; known: {[m.label for m in cls]}")


# Detectors: who saw a finding.
GUARD = "guard"            # 0xA5 marker bytes changed (overwrites only)
MEMCHECK = "memcheck"      # compute-sanitizer memcheck record
GUARD_PAGE = "guard_page"  # hardware fault on an unmapped page right after the tensor
POISON = "poison"          # output changed when the guard poison pattern changed (overread that matters)
UNINIT = "uninit"          # two runs, never-written bytes in two fill patterns: reads of them, outputs left unwritten
TRACE = "trace"            # every address of an interpreted Triton kernel (a run without a GPU) against the arena
TRACE_RACE = "trace_race"  # the trace's program instances of one launch: bytes two write, or one reads and another writes
RACECHECK = "racecheck"    # compute-sanitizer racecheck: shared-memory hazards
SYNCCHECK = "synccheck"    # compute-sanitizer synccheck: invalid barrier use
DETECTORS = (GUARD, MEMCHECK, GUARD_PAGE, POISON, UNINIT, TRACE, TRACE_RACE, RACECHECK, SYNCCHECK)
# What a scenario uses unless it says otherwise: racecheck and synccheck only where it declares them (a kernel that
# uses shared memory or barriers: they track every shared-memory access, 10 to 1,000 times slower).
DEFAULT_DETECTORS = (GUARD, MEMCHECK, GUARD_PAGE, POISON, UNINIT, TRACE, TRACE_RACE)
# Detectors that run inside another's pass, and go wherever it goes: a scenario that names the trace uses the race
# check of its launches too (the same interpreted run records both).
RIDES_WITH = {TRACE_RACE: TRACE}

# Finding kinds. An atomic is a write (an overwrite, with access "atomic" in its details). A misaligned
# access is its own kind, never an overread: its bytes may all lie inside the tensor.
OVERREAD = "overread"
OVERWRITE = "overwrite"
UNINIT_READ = "uninit_read"  # the kernel's results depend on bytes nobody wrote
UNWRITTEN = "unwritten"      # output bytes the kernel never wrote (they still hold the fill, whatever it was)
RACE = "race"                # two unordered accesses to one location, at least one a write: shared memory (racecheck),
                             # or a tensor's bytes touched by two program instances of one launch (trace_race)
BARRIER = "barrier"          # a barrier used wrongly (divergent __syncthreads, bad mask, ...)
MISALIGNED = "misaligned"     # an access the hardware refuses for its alignment (its own kind, never an overread)
KINDS = (OVERREAD, OVERWRITE, MISALIGNED, UNINIT_READ, UNWRITTEN, RACE, BARRIER)
# Detectors that see that an access happened but not whether it read or wrote (a guard-page fault): their
# finding matches an expected overread or overwrite alike.
ACCESS_BLIND = frozenset({GUARD_PAGE})
# Detectors whose inexact byte ranges bound the bytes really read (an output changed when they changed): every
# range they name must lie inside an expected range, when the expectation names ranges.
BOUNDING = frozenset({POISON})
# Where a shared-memory hazard or a barrier error is: not a byte range of any watched buffer.
SHARED = "__shared__"

# The region vocabulary of expectations and findings, the same for every detector (a range's region may
# carry an index: "row_padding[row 2]", "unused_row[5]"). Each detector's own word for the place
# (front_guard, back_guard, alignment_tail, past_allocation, ...) stays in the finding's details.
BEFORE_START = "before_start"
INSIDE = "inside"
ROW_PADDING = "row_padding"
UNUSED_ROW = "unused_row"
PAST_END = "past_end"
UNATTRIBUTED = "unattributed"     # buffer and region of an access that maps to no buffer of its case
SHARED_MEMORY = "shared"          # not a byte of any buffer: a shared-memory hazard or barrier (racecheck, synccheck)
REGIONS = (BEFORE_START, PAST_END, ROW_PADDING, UNUSED_ROW, INSIDE, SHARED_MEMORY)
# Detector words that earlier expectations used, and the region to write instead.
OLD_REGION_NAMES = {"front_guard": BEFORE_START, "before_allocation": BEFORE_START, "back_guard": PAST_END,
                    "alignment_tail": PAST_END, "past_allocation": PAST_END, "padding": ROW_PADDING,
                    "guard": f"{BEFORE_START}' or '{PAST_END}"}


# What each detector can see, for an expectation that names no detectors (ExpectedFinding): the kinds it reports,
# the regions they lie in (None: an expectation of any region), and whether only in a buffer of the case (never
# memory that is no allocation of ours, shared memory or a barrier, which only a sanitizer sees).
_OUTSIDE_LOGICAL = (None, BEFORE_START, PAST_END, ROW_PADDING, UNUSED_ROW)
_ANYWHERE = (None, *REGIONS)
SIGHT: Mapping[str, tuple[tuple[str, ...], tuple[str | None, ...], bool]] = {
    GUARD: ((OVERWRITE,), _OUTSIDE_LOGICAL, True),
    MEMCHECK: ((OVERREAD, OVERWRITE, MISALIGNED), (None, BEFORE_START, PAST_END, SHARED_MEMORY), False),
    GUARD_PAGE: ((OVERREAD, OVERWRITE), (None, BEFORE_START, PAST_END), True),
    POISON: ((OVERREAD,), _OUTSIDE_LOGICAL, True),
    UNINIT: ((UNINIT_READ, UNWRITTEN), _ANYWHERE, False),
    TRACE: ((OVERREAD, OVERWRITE), _OUTSIDE_LOGICAL, True),
    TRACE_RACE: ((RACE,), (None, INSIDE, BEFORE_START, PAST_END), True),
    RACECHECK: ((RACE,), _ANYWHERE, False),
    SYNCCHECK: ((BARRIER,), _ANYWHERE, False),
}
NOT_OURS = frozenset({UNATTRIBUTED, SHARED, "barrier"})   # buffers that are no buffer of the case
# Detectors whose expected findings the trace sees too, where SIGHT lets it (ExpectedFinding): accesses outside a
# tensor's logical bytes in a buffer of ours, each seen by its address (memcheck, the guard page) or its bytes.
STANDS_IN_FOR_TRACE = frozenset({GUARD, MEMCHECK, GUARD_PAGE, POISON})
# Detectors that see only bytes inside a buffer's allocation (the markers there, the trace's arena): a region the
# placement keeps outside the allocation (no back guard under a flush placement) is not theirs to check.
IN_ALLOCATION = frozenset({GUARD, TRACE})


def seeing(kind: str, buffer: str, region: str | None) -> tuple[str, ...]:
    """Every detector that can see this kind of access to this buffer in this region (SIGHT)."""
    return tuple(name for name, (kinds, regions, ours) in SIGHT.items()
                 if kind in kinds and region in regions and not (ours and buffer in NOT_OURS))


def region_class(region: str) -> str:
    """'row_padding[row 2]' -> 'row_padding'; 'unused_row[5]' -> 'unused_row'; plain names unchanged."""
    return region.split("[", 1)[0]


def check_region(region: str) -> str:
    """A region class of the vocabulary, or a ValueError saying which word to use instead."""
    if region in REGIONS:
        return region
    hint = OLD_REGION_NAMES.get(region_class(region))
    if hint:
        raise ValueError(f"region {region!r} is a detector's word, not a region: use '{hint}' "
                         f"(regions: {', '.join(REGIONS)})")
    raise ValueError(f"unknown region {region!r}; regions: {', '.join(REGIONS)}")


@dataclass(frozen=True)
class ByteRange:
    """A run of bytes of one buffer, offsets relative to the first byte of the tensor (end exclusive)."""

    region: str          # e.g. "row_padding[row 2]", "past_end", "unused_row[5]", "before_start"
    start: int
    end: int
    logical: str = ""    # the scenario's words for the place, e.g. "token 2, scale bytes 72..79"

    @property
    def nbytes(self) -> int:
        return self.end - self.start


# The bytes field of Finding.key() for a finding whose count is not exact: a bound that moves between identical runs
# (a wild access's count depends on which of its addresses land inside some other live allocation, a poison bound on
# the time left to refine it), so it cannot be part of an identity that must stay the same from run to run.
INEXACT_BYTES = "~"


def key_bytes(nbytes: int, exact: bool) -> str:
    return str(nbytes) if exact else INEXACT_BYTES


@dataclass(frozen=True)
class Finding:
    """One kind of bad access by one kernel into one region class of one buffer, seen by one detector."""

    detector: str
    kind: str
    buffer: str
    region: str                      # region class (REGIONS), or "unattributed"
    bytes: int                       # distinct bytes touched
    count: int = 1                   # accesses (sanitizer records) or changed ranges (guard)
    kernel: str = ""
    arch: str = ""
    ranges: tuple[ByteRange, ...] = ()
    first_thread: str = ""
    first_block: str = ""
    source: str = ""                 # file:line of the access
    note: str = ""
    exact: bool = True               # False when the detector cannot count bytes (hardware fault, poison)
    # The detector's own words, kept as they were: its zone ("back_guard", "alignment_tail"), the
    # sanitizer's record text, the access ("read", "write", "atomic"), a distance to the nearest buffer...
    details: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.details, Mapping) or isinstance(self.details, list):
            # read back from JSON (an object), by whichever reader: always the same hashable tuple
            items = self.details.items() if isinstance(self.details, Mapping) else self.details
            object.__setattr__(self, "details", tuple((str(k), str(v)) for k, v in items))

    def detail(self, key: str) -> str:
        return dict(self.details).get(key, "")

    @property
    def span(self) -> tuple[int, int] | None:
        if not self.ranges:
            return None
        return min(r.start for r in self.ranges), max(r.end for r in self.ranges)

    def key(self) -> str:
        """Identity for baselines, SARIF and Code Quality fingerprints: stable across runs and addresses. The byte
        count is part of it only where the detector measured it exactly (key_bytes)."""
        return f"{self.detector}:{self.kind}:{self.kernel}:{self.buffer}:{self.region}:{key_bytes(self.bytes, self.exact)}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ranges"] = [asdict(r) for r in self.ranges]
        data["details"] = dict(self.details)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Finding":
        fields = dict(data)
        fields["ranges"] = tuple(ByteRange(**r) for r in fields.get("ranges", ()))
        return cls(**fields)


def placed(finding: Finding) -> bool:
    """Whether a finding's region says where the access went: an exact count's region always does, and so does an
    inexact one's that names a region class or that the access hit no buffer of ours (unattributed); a hardware
    fault's region that cannot be told does not (an expectation's region is then not held against it)."""
    return finding.exact or finding.region in REGIONS or finding.region == UNATTRIBUTED


@dataclass(frozen=True)
class ExpectedFinding:
    """What a known bug must produce. `bytes`/`ranges` None means 'any amount'.

    `detectors`: the detectors that see it; left out (the default), every detector that can see this kind of
    access in this region (SIGHT: an overread past the end is memcheck's, the guard page's and poison's). `blind`: detectors that see such accesses in general but cannot see this one, each with
    the reason (poison when the output does not depend on the bytes read...): they are dropped from `detectors`,
    and where only they ran the case is not applicable, with that reason."""

    kind: str
    buffer: str
    detectors: tuple[str, ...] = ()
    region: str | None = None
    bytes: int | None = None
    ranges: tuple[tuple[int, int], ...] | None = None
    upstream: str = ""               # e.g. "triton-lang/triton#10772"
    blind: tuple[tuple[str, str], ...] = ()   # (detector, why it cannot see this one)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"expected finding of kind {self.kind!r}: kinds are {', '.join(KINDS)}")
        if self.region is not None:
            check_region(self.region)
        if isinstance(self.blind, Mapping):
            object.__setattr__(self, "blind", tuple(self.blind.items()))
        unknown = (set(self.detectors) | {d for d, _ in self.blind}) - set(DETECTORS)
        if unknown:
            raise ValueError(f"expected finding names unknown detector(s) {sorted(unknown)}; known: {DETECTORS}")
        detectors = self.detectors or seeing(self.kind, self.buffer, self.region)
        if TRACE not in detectors and set(detectors) & STANDS_IN_FOR_TRACE and TRACE in seeing(self.kind, self.buffer, self.region):
            # the interpreter's trace sees every access a detector named here sees in a buffer of ours: an
            # expectation written for a GPU's memcheck (or the markers, poison) is also the trace's, on a CPU
            detectors = (*detectors, TRACE)
        blind = {d for d, _ in self.blind}
        object.__setattr__(self, "detectors", tuple(d for d in detectors if d not in blind))

    def matches(self, finding: Finding) -> bool:
        if finding.detector not in self.detectors:
            return False
        if finding.kind != self.kind and not (finding.detector in ACCESS_BLIND and {finding.kind, self.kind} <= {OVERREAD, OVERWRITE}):
            return False
        if finding.buffer != self.buffer:
            return False  # a fault that names several candidates ("a|b": not told apart) matches none of them
        # an inexact finding is held to its region when it has one (poison, a wild access: unattributed); not when it
        # cannot tell (a fault)
        if self.region is not None and placed(finding) and finding.region != self.region:
            return False
        if self.bytes is not None and finding.exact and finding.bytes != self.bytes:
            return False
        if self.ranges is not None and finding.exact:
            got = tuple(sorted((r.start, r.end) for r in finding.ranges))
            if got != tuple(sorted(self.ranges)):
                return False
        if self.ranges is not None and finding.detector in BOUNDING and finding.ranges:
            # a bound on the bytes read (poison): it may miss bytes that changed nothing, never name a byte not read
            if not all(any(lo <= r.start and r.end <= hi for lo, hi in self.ranges) for r in finding.ranges):
                return False
        return True

    def matches_spill(self, finding: Finding) -> bool:
        """`finding` is this expected overrun seen where it landed: another buffer's guard (a guard finding whose
        details name the victim, gpu_memsafety.detectors.guard), with this expectation's buffer as its culprit. It
        covers the finding (never unexpected) without counting as seen: the markers only see it when the overrun
        happens to land in a guard."""
        if not finding.detail("victim") or finding.kind != self.kind or finding.buffer != self.buffer:
            return False
        return self.region is None or finding.region == self.region

    def matches_landing(self, finding: Finding) -> bool:
        """`finding` may be this expected access to memory that is no buffer of ours, seen where it landed: poison
        (which names only our buffers) saw a read in one of our buffers' guards, outside the tensor, where another
        allocation's access lands when the allocator put that allocation next to it (the batched split-k
        scratchpad of triton#8327 writes and reads back slots past its end, over w_scale's front guard). Poison
        cannot tell such a read from the buffer's own; memcheck can, and does in the modes that run it. Like a
        spill it covers the finding without counting as seen."""
        return self.wild and finding.detector in BOUNDING and finding.region in (BEFORE_START, PAST_END)

    @property
    def wild(self) -> bool:
        """An expected read or write of memory that is no buffer of the case (UNATTRIBUTED: the scratchpad of
        triton#8327): where it lands depends on the allocator, so only memcheck places it."""
        return self.buffer == UNATTRIBUTED and self.kind in (OVERREAD, OVERWRITE)

    def describe(self) -> str:
        amount = f"{self.bytes} B" if self.bytes is not None else "any bytes"
        where = f"{self.buffer}/{self.region}" if self.region else self.buffer
        up = f" (upstream {self.upstream})" if self.upstream else ""
        return f"{self.kind} of {where}, {amount}, seen by {'/'.join(self.detectors)}{up}"


@dataclass(frozen=True)
class Expectation:
    findings: tuple[ExpectedFinding, ...] = ()
    reason: str = ""

    @property
    def clean(self) -> bool:
        return not self.findings

    def describe(self) -> str:
        if self.clean:
            return "clean"
        return "; ".join(f.describe() for f in self.findings)


@dataclass
class DetectorRun:
    """Whether a detector actually ran for a case, and if not, why: a detector that did not run is never 'clean'."""

    detector: str
    ran: bool
    detail: str = ""
    missing: bool = False   # it should have run here and could not (tool absent or unusable): never a pass


@dataclass
class CaseResult:
    case_id: str
    scenario: str
    variant: str
    params: dict[str, Any]
    kernel: str
    arch: str
    mode: str
    outcome: Outcome
    expected: str
    findings: list[Finding] = field(default_factory=list)
    detectors: list[DetectorRun] = field(default_factory=list)
    message: str = ""
    duration_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    # What the verdict of a case judged from evidence saw (gpu_memsafety.judge.rules.Seen), for a later stage of a
    # staged mode; never reported (to_json leaves it out), None for a case not judged from evidence.
    seen: Any = field(default=None, compare=False, repr=False)

    @property
    def failed(self) -> bool:
        return self.outcome.is_failure

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "scenario": self.scenario,
            "variant": self.variant,
            "params": self.params,
            "kernel": self.kernel,
            "arch": self.arch,
            "mode": self.mode,
            "expected": self.expected,
            "outcome": self.outcome.label,
            "failed": self.failed,
            "findings": [f.to_json() for f in self.findings],
            "detectors": [asdict(d) for d in self.detectors],
            "message": self.message,
            "duration_s": round(self.duration_s, 3),
            "details": self.details,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CaseResult":
        return cls(
            case_id=data["id"],
            scenario=data["scenario"],
            variant=data["variant"],
            params=dict(data.get("params", {})),
            kernel=data.get("kernel", ""),
            arch=data.get("arch", ""),
            mode=data.get("mode", ""),
            outcome=Outcome.from_label(data["outcome"]),
            expected=data.get("expected", ""),
            findings=[Finding.from_json(f) for f in data.get("findings", [])],
            detectors=[DetectorRun(**d) for d in data.get("detectors", [])],
            message=data.get("message", ""),
            duration_s=float(data.get("duration_s", 0.0)),
            details=dict(data.get("details", {})),
        )
