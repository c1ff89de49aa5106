"""What compute-sanitizer reported, as typed records: what both parsers (xml_file, text_log) produce and
everything downstream (attribution, the judge, the hazard detectors) reads.

A record has a category (what kind of report it is: a memory access, an API error, the target's exit, the tool's
own failure, a racecheck hazard, a synccheck error, or "other"), the fields the tool gave for it, and, for a
memory access whose bytes cannot be placed, why (`unplaceable`). `classify` names what a record says happened, one
word per kind of report the tools document. An "other" record is never evidence of a clean run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MEMORY_ACCESS = "memory_access"
API_ERROR = "api_error"
PROCESS_EXIT = "process_exit"
INTERNAL_ERROR = "internal_error"
HAZARD = "hazard"          # racecheck: two unordered accesses to shared memory
SYNC_ERROR = "sync_error"  # synccheck: a barrier or warp-sync primitive used wrongly
OTHER = "other"
CATEGORIES = (MEMORY_ACCESS, API_ERROR, PROCESS_EXIT, INTERNAL_ERROR, HAZARD, SYNC_ERROR, OTHER)
ATOMIC = "atomic"


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
            name = _short(self.file)
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
    kernel: str = ""                             # the kernel that made the access (the outermost device frame)
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
    # The device function the access was made in when it is not the kernel (inlined: atomicAdd, a helper), with
    # its place ("atomicAdd at device_atomic_functions.hpp:107"); file and line above are then the innermost
    # frame outside the CUDA toolkit's headers (the kernel author's line), see `device_frames`.
    inlined: str = ""


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


# ------------------------------------------------------------------------------------------ device frames

@dataclass(frozen=True)
class Frame:
    """One device frame: the access's own (<where>, "at ...") or a caller's (<deviceStack>, "Device Frame: ...")."""

    func: str
    file: str = ""
    line: int | None = None
    pc: str = ""


# The CUDA toolkit's own headers (atomics, intrinsics, cooperative groups, CCCL), under a toolkit or a pip
# wheel's include folder: a line there says nothing about the kernel that called it.
_TOOLKIT_HEADER = re.compile(r"(^|/)(cuda[^/]*|nvidia|cccl|cuda_runtime|cuda_nvcc)/(.+/)?include/")
# The text output names files without their folder: the toolkit's headers by their names (device_atomic_functions.hpp,
# sm_60_atomic_functions.hpp, cuda_fp16.hpp, math_functions.hpp, cooperative_groups.h, ...).
_TOOLKIT_NAME = re.compile(r"^(device_\w+|sm_\d+_\w+|cuda_\w+|math_\w+|crt_\w+|cooperative_groups\w*)\.(h|hpp)$")


def toolkit_header(path: str) -> bool:
    path = path.replace("\\", "/")
    return bool(_TOOLKIT_HEADER.search(path) or ("/" not in path and _TOOLKIT_NAME.match(path)))


def device_frames(where: Frame, callers: tuple[Frame, ...]) -> dict[str, object]:
    """Kernel, file, line, pc and `inlined` of an access made at `where`, called through `callers` (innermost
    first, the kernel last: memcheck's device stack, H200 probe ci/gpu/probes/shared_atomic.cu: an atomicAdd
    inlined into a helper inlined into the kernel reads `<where><func>atomicAdd` in device_atomic_functions.hpp:107,
    then frames `bump` at shared_atomic.cu:5 and `probe_align_count` at :11). The kernel is the last frame; the
    line is the innermost frame outside the toolkit's headers; `inlined` names the function of the access when it
    is not the kernel. Without callers, the access's own frame is the kernel's."""
    if not callers:
        return {"kernel": where.func, "file": where.file, "line": where.line, "pc": where.pc}
    frames = (where, *callers)
    user = next((f for f in frames if f.file and not toolkit_header(f.file)), where)
    at = f" at {_short(where.file)}:{where.line}" if where.file and where.line is not None else ""
    return {"kernel": callers[-1].func, "file": user.file, "line": user.line, "pc": where.pc,
            "inlined": f"{where.func}{at}" if where.func != callers[-1].func else ""}


def _short(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


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
