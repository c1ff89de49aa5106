"""compute-sanitizer's `--xml --save` file -> records (gpu_memsafety.sanitizer.parse.record).

XML safety: the file is written by a process that ran code under test, so it is treated as untrusted.
compute-sanitizer's XML never has a DOCTYPE; any DOCTYPE or ENTITY declaration is refused with
`HostileXMLError` before anything in it is processed, so entity-expansion bombs and external entities are
never expanded and never fetched. This uses the standard library's expat directly (a DOCTYPE handler that
raises, parameter entities off, external references refused) instead of defusedxml: defusedxml's pull
parser is ElementTree's, which hides the expat object we need for incremental feeding, and the rule we need
("no DTD at all") is three handlers. No new dependency.

Incremental: the bytes are fed to expat in chunks and a record is converted when its </record> closes, so
a truncated file still yields every complete record, with complete=False and where it stopped.

Record kinds: "Precise" memory-access records are what the H200 runs produced (tests/data/sanitizer/).
"Api" is documented in NVIDIA's manual (Error suppression section: <api>, <error>, <message>, <result>).
The binary also names other kinds (Imprecise, Initcheck, Hazard, Analysis, Synccheck, deviceheap, ...)
whose fields we have never seen: those become category "other" with the text and every leaf of <what>
kept in `details`. No recorded racecheck or synccheck XML was available, so their XML records stay "other"
and the judge compares their count with the text's.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Iterator
from xml.parsers import expat

from gpu_memsafety.sanitizer.parse.record import (API_ERROR, MEMORY_ACCESS, OTHER, Frame, ParseResult, SanitizerRecord,
                                                  device_frames, normalize_direction, normalize_space, parse_int,
                                                  placeability)

ROOT_TAG = "ComputeSanitizerOutput"
RECORD_TAG = "record"
# Feed size for the incremental parser: small enough that a killed run's partial file is read record by
# record, large enough that a 100 MB file is a few thousand calls.
CHUNK_BYTES = 1 << 16


class HostileXMLError(ValueError):
    """The XML declares a DOCTYPE or entities: refused, never expanded, never fetched."""


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


def _frame(element: ET.Element | None) -> Frame:
    return Frame(func=_child_text(element, "func"), file=_child_text(element, "path"),
                 line=parse_int(_child_text(element, "line")), pc=_child_text(element, "pc"))


def _code(element: ET.Element) -> dict[str, object]:
    """Kernel, file, line, pc and inlined function of a record: <where> and <deviceStack>'s frames
    (`--show-backtrace device`; record.device_frames)."""
    stack = element.find("deviceStack")
    callers = tuple(_frame(f) for f in stack.findall("frame")) if stack is not None else ()
    return device_frames(_frame(element.find("where")), tuple(c for c in callers if c.func))


def record_from_xml(element: ET.Element) -> SanitizerRecord:
    """One <record> element -> SanitizerRecord. Unknown kinds keep their text and <what> leaves."""
    kind = _child_text(element, "kind")
    what, who = element.find("what"), element.find("who")
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
        **_code(element),  # type: ignore[arg-type]
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
        if len(self._stack) == 1:
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
