"""compute-sanitizer's text output (the log; for versions or runs without XML, and racecheck and synccheck,
whose records are read from it) -> records (gpu_memsafety.sanitizer.parse.record).

The text formats are known from real runs (tests/data/sanitizer/README.md names the public logs each test's text
follows). Lines the sanitizer wrote start with its prefix; the target's own output is skipped. A record is a
header line and its indented detail lines. memcheck: "Invalid __global__ read of size 4 bytes / at K+0x100 in
f.cu:12 / by thread (..) in block (..) / Address 0x... is out of bounds / and is N bytes after the nearest
allocation at A of size S bytes". Three racecheck and synccheck shapes exist: racecheck's analysis ("Race
reported between Write access at K+0x140 in f.cu:31 / and Read access at ... [16 hazards]"), its hazard mode
("Potential RAW hazard detected at __shared__ 0x10 in block (0,0,0) : / Write Thread (3,0,0) at ... / Read
Thread (0,0,0) at ..."), and synccheck's "Barrier error detected. Divergent thread(s) in block / at K+0x.. in
f.cu:12 / by thread ...". racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"
instead of an ERROR SUMMARY line; both count as the end of the output. Output without that end line is
incomplete (the sanitizer was killed or the log was cut), and so is output over the print limit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from gpu_memsafety.sanitizer.parse.record import (API_ERROR, HAZARD, INTERNAL_ERROR, MEMORY_ACCESS, OTHER,
                                                  PROCESS_EXIT, SYNC_ERROR, Frame, HazardAccess, ParseResult,
                                                  SanitizerRecord, device_frames, normalize_direction, normalize_space, parse_int,
                                                  placeability)

DEFAULT_PREFIX = "========="  # compute-sanitizer's --prefix default
# Messages that mean the target was never instrumented (no record can exist for it).
_NOT_ATTACHED = ("terminated before first instrumented", "No attachable process found")

_HEX = r"0x[0-9a-fA-F]+"
_NUM = r"\d[\d,]*"
_ACCESS_RE = re.compile(rf"^Invalid (?P<space>\S+) (?P<dir>\w+) of size (?P<size>{_NUM}) bytes?")
_API_RE = re.compile(
    rf'^Program hit (?P<error>\S+) \(error (?P<code>{_NUM})\) due to "?(?P<msg>.*?)"? on CUDA API call to '
    r"(?P<api>[\w:]+)"
)
_EXIT_RE = re.compile(rf"^Target application returned (?:an error|error code (?P<code>{_NUM}))")
_NOT_PRINTED_RE = re.compile(rf"^ERROR SUMMARY: (?P<n>{_NUM}) errors? were not printed")
_SUMMARY_RE = re.compile(rf"^ERROR SUMMARY: (?P<n>{_NUM}) errors?\s*$")
_INTERNAL_RE = re.compile(r"^Error: (?P<msg>.*)$")
# Where code is: "kernel+0x140 in race.cu:31" or "kernel+0x140" (memcheck's "at ..." lines, racecheck's accesses).
_CODE_AT = rf"(?P<func>.+)\+(?P<pc>{_HEX})(?: in (?P<file>.+?)(?::(?P<line>\d+))?)?"
_AT_RE = re.compile(rf"^at {_CODE_AT}$")
_WHO_RE = re.compile(r"^by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_ADDR_RE = re.compile(rf"^(?:Address|Access to) (?P<addr>{_HEX}) is (?P<error>.+?)\.?$")
_ALLOC_RE = re.compile(
    rf"^and is (?P<dist>{_NUM}) bytes? (?P<rel>after|before) the nearest allocation at (?P<base>{_HEX}) "
    rf"of size (?P<size>{_NUM}) bytes?"
)
_BACKTRACE_RE = re.compile(r"^(Saved host backtrace|Host Frame:|Device Frame:)")
# A caller of the access's function (`--show-backtrace device`): "Device Frame: bump(int *, int)+0x120 in f.cu:5";
# the older "Device Frame:/f.cu:12:kernel (kernel : 0x46c0)" names no pc and is skipped.
_DEVICE_FRAME_RE = re.compile(rf"^Device Frame:\s*{_CODE_AT}$")
# racecheck and synccheck. A level prefix ("Error: ", "Warning: ", old "WARN:(Warp Level Programming) ") is
# optional; it must be taken before _INTERNAL_RE, which would read "Error: Race reported ..." as a failure.
_LEVEL = r"(?:(?P<level>Error|ERROR|Warning|WARNING|WARN|Info|INFO):(?:\((?P<why>[^)]*)\))?\s*)?"
_RACE_RE = re.compile(rf"^{_LEVEL}Race reported between (?P<dir>Read|Write) access at (?P<loc>.+?)\s*$")
_RACE_AND_RE = re.compile(rf"^and (?P<dir>Read|Write) access at (?P<loc>.+?)(?: \[(?P<n>{_NUM}) hazards?\])?$")
_HAZARD_RE = re.compile(
    rf"^{_LEVEL}Potential (?P<type>RAW|WAR|WAW) hazard detected at (?P<space>[_a-z]+)(?: (?P<addr>{_HEX}))?"
    r"(?: in block \((?P<block>[\d, ]+)\))?\s*:?\s*$"
)
_HAZARD_SIDE_RE = re.compile(r"^(?P<dir>Read|Write) Thread \((?P<thread>[\d, ]+)\) at (?P<loc>.+)$")
_SYNC_RE = re.compile(rf"^{_LEVEL}(?P<what>\w+ error detected)\.?\s*(?P<msg>.*)$")
_RACE_SUMMARY_RE = re.compile(rf"^RACECHECK SUMMARY: (?P<n>{_NUM}) hazards? displayed")
# Where an access is: _CODE_AT, or the older "0x140 in race.cu:31:kernel".
_LOC_RE = re.compile(rf"^{_CODE_AT}$")
_LOC_OLD_RE = re.compile(rf"^(?P<pc>{_HEX}) in (?P<file>.+?):(?P<line>\d+):(?P<func>.+)$")


def _location(text: str) -> dict[str, object]:
    """kernel, pc, file and line of 'K+0x140 in f.cu:31' (or the older '0x140 in f.cu:31:K'); the kernel
    alone when neither shape fits."""
    m = _LOC_RE.match(text) or _LOC_OLD_RE.match(text)
    if m is None:
        return {"kernel": text.strip()}
    return {"kernel": m["func"], "pc": m["pc"], "file": m["file"] or "", "line": parse_int(m["line"])}


def _triple_text(text: str | None) -> tuple[int, int, int] | None:
    values = [parse_int(v) for v in (text or "").split(",")]
    if len(values) != 3 or any(v is None for v in values):
        return None
    return (values[0], values[1], values[2])  # type: ignore[return-value]


def _access_of(direction: str, loc: str, **extra: object) -> HazardAccess:
    return HazardAccess(direction=normalize_direction(direction), **_location(loc), **extra)  # type: ignore[arg-type]


def _tool_header_fields(header: str) -> dict[str, object] | None:
    """racecheck and synccheck record headers; None for anything else."""
    if m := _RACE_RE.match(header):
        first = _access_of(m["dir"], m["loc"])
        return {"category": HAZARD, "level": m["level"] or "", "kernel": first.kernel, "file": first.file,
                "line": first.line, "pc": first.pc, "space": "shared", "accesses": (first,)}
    if m := _HAZARD_RE.match(header):
        return {"category": HAZARD, "level": m["level"] or "", "hazard": m["type"], "error": f"{m['type']} hazard",
                "space": normalize_space(m["space"]), "address": parse_int(m["addr"]),
                "block": _triple_text(m["block"]), "accesses": ()}
    if m := _SYNC_RE.match(header):
        return {"category": SYNC_ERROR, "level": m["level"] or "", "error": m["msg"].strip() or m["what"]}
    return None


def _header_fields(header: str) -> dict[str, object]:
    """Category and fields of a record's first line."""
    if m := _ACCESS_RE.match(header):
        return {"category": MEMORY_ACCESS, "space": normalize_space(m["space"]),
                "direction": normalize_direction(m["dir"]), "size": parse_int(m["size"]) or 0}
    if m := _API_RE.match(header):
        return {"category": API_ERROR, "error": m["error"], "result": parse_int(m["code"]), "api": m["api"]}
    if m := _EXIT_RE.match(header):
        return {"category": PROCESS_EXIT, "result": parse_int(m["code"])}
    if (tool := _tool_header_fields(header)) is not None:
        return tool
    if _INTERNAL_RE.match(header):
        return {"category": INTERNAL_ERROR}
    return {"category": OTHER}


def _detail_fields(line: str) -> dict[str, object] | None:
    """Fields of an indented detail line; None when the line is not one we know."""
    if m := _AT_RE.match(line):
        return {"kernel": m["func"], "pc": m["pc"], "file": m["file"] or "", "line": parse_int(m["line"])}
    if line.startswith("at ") and (m := _LOC_OLD_RE.match(line[3:])):
        return _location(line[3:])
    if m := _WHO_RE.match(line):
        values = [int(v) for v in m.groups()]
        return {"thread": tuple(values[:3]), "block": tuple(values[3:])}
    if m := _ADDR_RE.match(line):
        return {"address": parse_int(m["addr"]), "error": m["error"]}
    if m := _ALLOC_RE.match(line):
        return {"alloc_relation": m["rel"], "alloc_distance": parse_int(m["dist"]),
                "alloc_address": parse_int(m["base"]), "alloc_size": parse_int(m["size"])}
    return None


class _TextRecord:
    """A record being assembled from a header line and its indented detail lines."""

    def __init__(self, header: str) -> None:
        self.header = header
        self.fields = _header_fields(header)
        self.unparsed: list[str] = []
        self.callers: list[Frame] = []

    def add_detail(self, line: str) -> None:
        if m := _DEVICE_FRAME_RE.match(line):
            self.callers.append(Frame(func=m["func"], file=m["file"] or "", line=parse_int(m["line"]), pc=m["pc"]))
            return
        if _BACKTRACE_RE.match(line):
            return
        if self.fields["category"] == HAZARD and self._add_access(line):
            return
        known = _detail_fields(line)
        if known is None:
            self.unparsed.append(line)
        else:
            self.fields.update(known)

    def _add_access(self, line: str) -> bool:
        """An access line of a racecheck record ("and Read access at ...", "Write Thread (1,0,0) at ...")."""
        if m := _RACE_AND_RE.match(line):
            access = _access_of(m["dir"], m["loc"], hazards=parse_int(m["n"]))
        elif m := _HAZARD_SIDE_RE.match(line):
            access = _access_of(m["dir"], m["loc"], thread=_triple_text(m["thread"]))
        else:
            return line.startswith("Current Value")  # hazard mode's values: nothing to keep
        accesses = tuple(self.fields.get("accesses", ())) + (access,)  # type: ignore[arg-type]
        self.fields["accesses"] = accesses
        if not self.fields.get("kernel"):
            self.fields.update(kernel=access.kernel, file=access.file, line=access.line, pc=access.pc,
                               thread=access.thread)
        return True

    def build(self) -> SanitizerRecord:
        fields = dict(self.fields)
        text = self.header
        if fields["category"] in (INTERNAL_ERROR, OTHER) and self.unparsed:
            text = " ".join([self.header, *self.unparsed])
        details = tuple(("line", u) for u in self.unparsed) if fields["category"] == OTHER else ()
        if fields["category"] == MEMORY_ACCESS:
            if self.callers and fields.get("kernel"):
                where = Frame(func=str(fields["kernel"]), file=str(fields.get("file") or ""),
                              line=fields.get("line"), pc=str(fields.get("pc") or ""))  # type: ignore[arg-type]
                fields.update(device_frames(where, tuple(self.callers)))
            address = fields.get("address")
            fields["unplaceable"] = placeability(None if address is None else str(address), str(fields.get("size")))
        return SanitizerRecord(text=text, details=details, **fields)  # type: ignore[arg-type]


@dataclass
class _TextState:
    records: list[SanitizerRecord]
    summary: int | None = None
    not_printed: int | None = None
    saw_end: bool = False
    current: _TextRecord | None = None

    def close(self) -> None:
        if self.current is not None:
            self.records.append(self.current.build())
            self.current = None


def _sanitizer_lines(text: str, prefix: str) -> Iterable[str]:
    """Lines the sanitizer wrote (prefix removed); the target's own output is skipped."""
    for raw in text.splitlines():
        if raw.startswith(prefix):
            yield raw[len(prefix):]


def _take_summary(state: _TextState, header: str) -> bool:
    if m := _NOT_PRINTED_RE.match(header):
        state.not_printed = parse_int(m["n"])
        return True
    if m := (_SUMMARY_RE.match(header) or _RACE_SUMMARY_RE.match(header)):
        state.summary = parse_int(m["n"])
        state.saw_end = True
        return True
    return header == "COMPUTE-SANITIZER"  # the banner


def _consume(state: _TextState, body: str) -> None:
    if not body.strip():
        state.close()
    elif body.startswith("  "):
        if state.current is not None:
            state.current.add_detail(body.strip())
    else:
        state.close()
        header = body.strip()
        if not _take_summary(state, header):
            state.current = _TextRecord(header)


def _attached(records: Iterable[SanitizerRecord], summary: int | None) -> bool | None:
    records = list(records)
    if any(r.category == INTERNAL_ERROR and any(s in r.text for s in _NOT_ATTACHED) for r in records):
        return False
    if summary is not None or any(r.category in (MEMORY_ACCESS, API_ERROR, PROCESS_EXIT, HAZARD, SYNC_ERROR) for r in records):
        return True
    return None


def _text_problem(state: _TextState, records: tuple[SanitizerRecord, ...]) -> str:
    internal = [r.text for r in records if r.category == INTERNAL_ERROR]
    if internal:
        return "sanitizer failed: " + "; ".join(internal)
    if state.not_printed:
        return f"{state.not_printed} errors were not printed (print limit): records are missing"
    if not state.saw_end:
        return "no 'ERROR SUMMARY' (or 'RACECHECK SUMMARY') line: the output ends early (sanitizer killed or log cut)"
    return ""


def parse_text(text: str, *, prefix: str = DEFAULT_PREFIX) -> ParseResult:
    """Records of compute-sanitizer's text output (for versions or runs without XML)."""
    state = _TextState(records=[])
    for body in _sanitizer_lines(text, prefix):
        _consume(state, body)
    state.close()
    records = tuple(state.records)
    problem = _text_problem(state, records)
    return ParseResult(records, complete=not problem, problem=problem, summary_errors=state.summary,
                       attached=_attached(records, state.summary), not_printed=state.not_printed)
