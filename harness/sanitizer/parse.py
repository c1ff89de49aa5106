"""Turn compute-sanitizer output (the `--xml --save` file, or the text log) into records.

Why this module exists: findings are taken from the sanitizer's own records, never from its
`ERROR SUMMARY` line (which also counts API errors and "Target application returned an error"), and a file
the sanitizer could not finish (killed process, print limit) must say so instead of reading as clean.
So every parse returns the records it could read plus `complete` and, when not complete, a `problem`.

XML safety: the file is written by a process that ran code under test, so it is treated as untrusted.
compute-sanitizer's XML never has a DOCTYPE; any DOCTYPE or ENTITY declaration is refused with
`HostileXMLError` before anything in it is processed, so entity-expansion bombs and external entities are
never expanded and never fetched. This uses the standard library's expat directly (a DOCTYPE handler that
raises, parameter entities off, external references refused) instead of defusedxml: defusedxml's pull
parser is ElementTree's, which hides the expat object we need for incremental feeding, and the rule we need
("no DTD at all") is three handlers. No new dependency.

Incremental: the bytes are fed to expat in chunks and a record is converted when its </record> closes, so
a truncated file still yields every complete record, with complete=False and where it stopped.

racecheck and synccheck: their records are read from the text output, whose format is known from real runs
(tests/data/sanitizer/README.md names the public logs each test's text follows); no recorded racecheck or
synccheck XML was available, so their XML records stay "other" and the judge compares their count with the
text's. Three text shapes exist: racecheck's analysis ("Race reported between Write access at K+0x140 in
f.cu:31 / and Read access at ... [16 hazards]"), its hazard mode ("Potential RAW hazard detected at
__shared__ 0x10 in block (0,0,0) : / Write Thread (3,0,0) at ... / Read Thread (0,0,0) at ..."), and
synccheck's "Barrier error detected. Divergent thread(s) in block / at K+0x.. in f.cu:12 / by thread ...".
racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)" instead of an
ERROR SUMMARY line; both count as the end of the output.

Record kinds: "Precise" memory-access records are what the H200 runs produced (tests/data/sanitizer/).
"Api" is documented in NVIDIA's manual (Error suppression section: <api>, <error>, <message>, <result>).
The binary also names other kinds (Imprecise, Initcheck, Hazard, Analysis, Synccheck, deviceheap, ...)
whose fields we have never seen: those become category "other" with the text and every leaf of <what>
kept in `details`. An "other" record is never evidence of a clean run.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Iterable, Iterator
from xml.parsers import expat

MEMORY_ACCESS = "memory_access"
API_ERROR = "api_error"
PROCESS_EXIT = "process_exit"
INTERNAL_ERROR = "internal_error"
HAZARD = "hazard"          # racecheck: two unordered accesses to shared memory
SYNC_ERROR = "sync_error"  # synccheck: a barrier or warp-sync primitive used wrongly
OTHER = "other"
CATEGORIES = (MEMORY_ACCESS, API_ERROR, PROCESS_EXIT, INTERNAL_ERROR, HAZARD, SYNC_ERROR, OTHER)

ROOT_TAG = "ComputeSanitizerOutput"
RECORD_TAG = "record"
# Feed size for the incremental parser: small enough that a killed run's partial file is read record by
# record, large enough that a 100 MB file is a few thousand calls.
CHUNK_BYTES = 1 << 16
DEFAULT_PREFIX = "========="  # compute-sanitizer's --prefix default

ATOMIC = "atomic"

# Messages that mean the target was never instrumented (no record can exist for it).
_NOT_ATTACHED = ("terminated before first instrumented", "No attachable process found")


class HostileXMLError(ValueError):
    """The XML declares a DOCTYPE or entities: refused, never expanded, never fetched."""


@dataclass(frozen=True)
class HazardAccess:
    """One of the accesses a racecheck hazard names."""

    direction: str                               # "read" / "write"
    kernel: str = ""
    pc: str = ""
    file: str = ""
    line: int | None = None
    thread: tuple[int, int, int] | None = None   # hazard mode only
    hazards: int | None = None                   # analysis mode: hazards between this access and the first

    @property
    def source(self) -> str:
        """'race.cu:31', or the kernel and pc when the code has no line information."""
        if self.file:
            name = self.file.replace("\\", "/").rsplit("/", 1)[-1]
            return f"{name}:{self.line}" if self.line is not None else name
        return f"{self.kernel}+{self.pc}" if self.pc else self.kernel


@dataclass(frozen=True)
class SanitizerRecord:
    category: str                                # one of CATEGORIES
    text: str                                    # the sanitizer's message
    kind: str = ""                               # XML <kind> ("Precise", "Api", ...); "" from text
    level: str = ""                              # XML <level> ("Error", "Warning")
    direction: str = ""                          # "read" / "write" / ""
    space: str = ""                              # "global", "shared", "local", ...
    size: int = 0                                # bytes of the access
    address: int | None = None
    thread: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    kernel: str = ""                             # function of the access
    file: str = ""
    line: int | None = None
    pc: str = ""                                 # offset in the function, e.g. "0x100"
    error: str = ""                              # "out of bounds", "misaligned", "cudaErrorLaunchFailure"
    api: str = ""                                # API call of an api_error
    result: int | None = None                    # API error code, or a process exit code
    # text form only: "and is N bytes after|before the nearest allocation at A of size S bytes".
    # "1 bytes after" is the first byte past the end: address == alloc_address + alloc_size - 1 + distance.
    alloc_relation: str = ""                     # "after" / "before" / ""
    alloc_distance: int | None = None
    alloc_address: int | None = None
    alloc_size: int | None = None
    details: tuple[tuple[str, str], ...] = ()    # leaves of <what> / unparsed lines, for unknown kinds
    # racecheck: the accesses of a hazard; analysis mode lists one access and every access it races with.
    accesses: tuple[HazardAccess, ...] = ()
    hazard: str = ""                             # hazard mode: "RAW", "WAR" or "WAW"
    unplaceable: str = ""                        # memory_access only: why its bytes cannot be placed ("" when they can)


@dataclass(frozen=True)
class ParseResult:
    records: tuple[SanitizerRecord, ...]
    complete: bool                    # True only when the whole output was read and nothing was dropped
    problem: str = ""                 # "" when complete
    summary_errors: int | None = None  # "ERROR SUMMARY: N errors" (racecheck: "N hazards displayed"): not a count of memory errors
    attached: bool | None = None      # False: the target was never instrumented; None: unknown
    not_printed: int | None = None    # "N errors were not printed" (print limit)

    def of(self, category: str) -> tuple[SanitizerRecord, ...]:
        return tuple(r for r in self.records if r.category == category)


# ------------------------------------------------------------------------------------------ value helpers

def parse_int(text: str | None) -> int | None:
    """'4', '4,000', '0x7f..' -> int; None when absent or not a number (never raises)."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "")
    try:
        return int(cleaned, 16) if cleaned.lower().startswith("0x") else int(cleaned)
    except ValueError:
        return None


def normalize_space(space: str) -> str:
    """'__global__' -> 'global'."""
    return space.strip().strip("_").lower()


def normalize_direction(direction: str) -> str:
    """'read' / 'write' / 'atomic' ('Atomic', 'atom', 'reduction': an atomic is a write); '' otherwise."""
    word = direction.strip().lower()
    if word in ("read", "write"):
        return word
    if word.startswith("atom") or word in ("red", "reduction"):
        return ATOMIC
    return ""


# -------------------------------------------------------------------------------------------- XML parsing

def _triple(element: ET.Element | None) -> tuple[int, int, int] | None:
    if element is None:
        return None
    values = [parse_int(element.findtext(axis)) for axis in ("x", "y", "z")]
    if any(v is None for v in values):
        return None
    return (values[0], values[1], values[2])  # type: ignore[return-value]


def _leaves(element: ET.Element | None, prefix: str = "") -> Iterator[tuple[str, str]]:
    if element is None:
        return
    for child in element:
        name = f"{prefix}{child.tag}"
        if len(child):
            yield from _leaves(child, name + "/")
        else:
            yield name, (child.text or "").strip()


def _xml_category(kind: str, what: ET.Element | None) -> str:
    if kind == "Api":
        return API_ERROR
    is_access = what is not None and (what.find("direction") is not None or what.find("address") is not None)
    return MEMORY_ACCESS if kind == "Precise" and is_access else OTHER


def _child_text(element: ET.Element | None, tag: str) -> str:
    if element is None:
        return ""
    return (element.findtext(tag) or "").strip()


def placeability(address: str | None, size: str | None) -> str:
    """Why an access with these address and size texts cannot be placed in bytes; "" when it can."""
    for name, text in (("address", address), ("size", size)):
        value = parse_int(text)
        if not (text or "").strip():
            return f"no {name}"
        if value is None:
            return f"{name} {text.strip()!r} is not a number"
        if value < 0 or (name == "size" and value == 0):
            return f"{name} {text.strip()} is {'negative' if value < 0 else 'zero'}"
    return ""


def record_from_xml(element: ET.Element) -> SanitizerRecord:
    """One <record> element -> SanitizerRecord. Unknown kinds keep their text and <what> leaves."""
    kind = _child_text(element, "kind")
    what, where, who = element.find("what"), element.find("where"), element.find("who")
    category = _xml_category(kind, what)
    unplaceable = placeability(_child_text(what, "address"), _child_text(what, "size")) if category == MEMORY_ACCESS else ""
    return SanitizerRecord(
        category=category,
        text=_child_text(what, "text"),
        kind=kind,
        level=_child_text(element, "level"),
        direction=normalize_direction(_child_text(what, "direction")),
        space=normalize_space(_child_text(what, "space")),
        size=parse_int(_child_text(what, "size")) or 0,
        address=parse_int(_child_text(what, "address")),
        thread=_triple(who.find("threadIdx")) if who is not None else None,
        block=_triple(who.find("blockIdx")) if who is not None else None,
        kernel=_child_text(where, "func"),
        file=_child_text(where, "path"),
        line=parse_int(_child_text(where, "line")),
        pc=_child_text(where, "pc"),
        error=_child_text(what, "error"),
        api=_child_text(what, "api"),
        result=parse_int(_child_text(what, "result")),
        details=tuple(_leaves(what)) if category == OTHER or unplaceable else (),
        unplaceable=unplaceable,
    )


class _Collector:
    """expat callbacks that build one small element tree per <record> and hand it over when it closes."""

    def __init__(self) -> None:
        self.records: list[SanitizerRecord] = []
        self.root_tag = ""
        self.root_closed = False
        self._stack: list[ET.Element] = []
        self._text: list[list[str]] = []
        self.parser = self._make_parser()

    def _make_parser(self) -> "expat.XMLParserType":
        parser = expat.ParserCreate()
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self._refuse_doctype
        parser.EntityDeclHandler = self._refuse_entity
        parser.ExternalEntityRefHandler = self._refuse_external
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._chars
        return parser

    def _where(self) -> str:
        return f"line {self.parser.CurrentLineNumber}, column {self.parser.CurrentColumnNumber}"

    def _refuse_doctype(self, name: str, *_: object) -> None:
        raise HostileXMLError(f"DOCTYPE {name!r} at {self._where()}: compute-sanitizer XML has none; "
                              "refused without expanding or fetching anything")

    def _refuse_entity(self, name: str, *_: object) -> None:
        raise HostileXMLError(f"ENTITY {name!r} declared at {self._where()}: refused")

    def _refuse_external(self, *_: object) -> int:
        raise HostileXMLError(f"external entity reference at {self._where()}: refused, not fetched")

    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        depth = len(self._stack)
        if depth == 0 and not self.root_tag:
            self.root_tag = tag
        element = ET.Element(tag, attrs) if depth <= 1 else ET.SubElement(self._stack[-1], tag, attrs)
        self._stack.append(element)
        self._text.append([])

    def _chars(self, data: str) -> None:
        if len(self._stack) > 1:  # text directly under the root is only whitespace between records
            self._text[-1].append(data)

    def _end(self, tag: str) -> None:
        element = self._stack.pop()
        element.text = "".join(self._text.pop())
        depth = len(self._stack)
        if depth == 0:
            self.root_closed = True
        elif depth == 1:
            self.records.append(self._top_level(element))

    def _top_level(self, element: ET.Element) -> SanitizerRecord:
        if element.tag == RECORD_TAG:
            return record_from_xml(element)
        return SanitizerRecord(category=OTHER, text=f"unexpected element <{element.tag}> in <{self.root_tag}>",
                               details=tuple(_leaves(element)))


def _feed(collector: _Collector, data: bytes) -> str:
    """Feed everything; return '' or the reason the document could not be read to its end."""
    try:
        for start in range(0, len(data), CHUNK_BYTES):
            collector.parser.Parse(data[start:start + CHUNK_BYTES], False)
        collector.parser.Parse(b"", True)
    except expat.ExpatError as exc:
        reason = expat.ErrorString(exc.code)
        return f"XML stops being readable at line {exc.lineno}, column {exc.offset}: {reason}"
    return ""


def parse_xml(data: bytes) -> ParseResult:
    """Records of a `--xml --save` file; raises HostileXMLError on any DOCTYPE/ENTITY, never expands it."""
    if not data.strip():
        return ParseResult((), False, "empty XML file: the sanitizer wrote nothing (killed, or never ran)")
    collector = _Collector()
    problem = _feed(collector, data)
    records = tuple(collector.records)
    if problem:
        problem += f" (after {len(records)} complete records; the file is truncated or damaged)"
    elif collector.root_tag != ROOT_TAG:
        problem = f"root element is <{collector.root_tag}>, not <{ROOT_TAG}>: not compute-sanitizer output"
    return ParseResult(records, complete=not problem, problem=problem, attached=True if records else None)


# ------------------------------------------------------------------------------------------- text parsing

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

    def add_detail(self, line: str) -> None:
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


# ------------------------------------------------------------------------------------- record classification
# Every kind of record the compute-sanitizer tools document (memcheck's "Supported error detection" table,
# racecheck's hazards and analysis reports, synccheck's barrier errors, initcheck's uninitialized and unused
# memory), as one word each. The record's own text is kept wherever the word is used.
READ, WRITE, MISALIGNED = "read", "write", "misaligned"
HARDWARE_EXCEPTION = "hardware_exception"   # memcheck: Warp Illegal Address, Invalid PC, Illegal Instruction, ...
MALLOC_FREE = "malloc_free"                 # memcheck: device-side malloc/free errors (double free, invalid free)
LEAK = "leak"                               # memcheck --leak-check: cudaMalloc and device-heap leaks
RACE_HAZARD = HAZARD                        # racecheck: RAW/WAR/WAW hazards and race reports (shared memory)
# SYNC_ERROR (synccheck: divergent or invalid barriers) is a category above and its own kind here.
UNINITIALIZED_READ = "uninitialized_read"   # initcheck: a read of global memory nobody wrote
UNUSED_MEMORY = "unused_memory"             # initcheck --track-unused-memory
RECORD_KINDS = (READ, WRITE, ATOMIC, MISALIGNED, HARDWARE_EXCEPTION, MALLOC_FREE, LEAK, RACE_HAZARD, SYNC_ERROR,
                UNINITIALIZED_READ, UNUSED_MEMORY, API_ERROR, PROCESS_EXIT, INTERNAL_ERROR, OTHER)

_HARDWARE_WORDS = ("illegal address", "misaligned address", "out-of-range", "invalid pc", "misaligned pc",
                   "illegal instruction", "invalid address space", "stack overflow", "hardware exception",
                   "lane user stack overflow", "invalid program counter", "cuda exception")
_TEXT_KINDS = (
    (re.compile(r"\b(race reported|hazard detected|potential \w+ hazard)", re.I), RACE_HAZARD),
    (re.compile(r"^barrier error|\bsynccheck\b|divergent thread", re.I), SYNC_ERROR),
    (re.compile(r"^uninitialized .*(?:read|access)|uninitialized memory", re.I), UNINITIALIZED_READ),
    (re.compile(r"^unused memory", re.I), UNUSED_MEMORY),
    (re.compile(r"^leaked \d", re.I), LEAK),
    (re.compile(r"malloc/free|double free|invalid (?:device )?free|free of", re.I), MALLOC_FREE),
)
_XML_KINDS = {"Hazard": RACE_HAZARD, "Analysis": RACE_HAZARD, "Racecheck": RACE_HAZARD, "Synccheck": SYNC_ERROR,
              "Initcheck": UNINITIALIZED_READ, "Leak": LEAK, "DeviceHeap": LEAK, "deviceheap": LEAK,
              "Imprecise": HARDWARE_EXCEPTION, "HardwareException": HARDWARE_EXCEPTION}


def is_misaligned(record: SanitizerRecord) -> bool:
    return "misaligned" in record.error.lower() or (record.category == MEMORY_ACCESS and "misaligned" in record.text.lower())


def classify(record: SanitizerRecord) -> str:
    """One of RECORD_KINDS: what the record says happened (an access's direction, or the kind of report)."""
    if record.category == MEMORY_ACCESS:
        if is_misaligned(record):
            return MISALIGNED
        return record.direction or _direction_in(record.text) or OTHER
    if record.category in (API_ERROR, PROCESS_EXIT, INTERNAL_ERROR, HAZARD, SYNC_ERROR):
        return record.category
    text = " ".join([record.text, *(v for _, v in record.details)]).strip()
    for pattern, kind in _TEXT_KINDS:
        if pattern.search(text):
            return kind
    if record.kind in _XML_KINDS:
        return _XML_KINDS[record.kind]
    if any(w in text.lower() for w in _HARDWARE_WORDS):
        return HARDWARE_EXCEPTION
    return OTHER


def _direction_in(text: str) -> str:
    m = re.search(r"\b(read|write|atomic\w*|reduction)\b", text, re.I)
    return normalize_direction(m[1]) if m else ""
