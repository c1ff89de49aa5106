"""Uninit mode's report (harness/gpu_memsafety/detectors/fillcheck.py, in the worker) -> findings naming the buffer and the bytes.

Pure: works on the worker's JSON (the "uninit" report and the buffer map), so it is tested on CPU.

- `unwritten`: bytes of a declared output that held fill 0xA5 after one run and 0x5A after the other: the
  kernel never wrote them (or wrote bytes nobody wrote). One finding per output buffer and region class.
- `uninit_read`: a buffer whose never-written bytes the kernel read: changing only that buffer's fill
  changed other bytes or outputs. The ranges are the bytes whose fill matters, searched by changing the fill of
  parts of the buffer (fillcheck._read_bytes): exact when they are the bytes whose value followed the fill at the
  end, confirmed at each end; a bound otherwise (bytes read before a later write, or narrowed by bisection); the
  note says what they changed.
- differences that no single buffer's fill explains are a finding on buffer "?" (never dropped); bytes that
  differ between two runs with the same fill are not judged, and the note says how many.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Mapping, Sequence

from gpu_memsafety.detectors.base import Evidence, Unit
from gpu_memsafety.model import UNINIT, UNINIT_READ, UNWRITTEN, ByteRange, DetectorRun, Finding
from gpu_memsafety.placement import layout as L

# In a floating-point buffer whose values change from run to run on their own (atomics in another order), a
# difference between the fills is their effect only beyond this many times the largest run-to-run difference
# seen there (harness/gpu_memsafety/detectors/fillcheck.py).
NOISE_FACTOR = 64.0

Describe = Callable[[str, int, int], str]   # (buffer, start, end) -> the scenario's words
UNKNOWN_BUFFER = "?"
ACTION = "fill"             # the worker side: gpu_memsafety.detectors.fillcheck.run


class UninitDetector(Unit):
    name = UNINIT
    sanitizer = None
    placement = L.GUARDED
    needs_cover = needs_gpu = False
    action = ACTION
    action_at = "gpu_memsafety.detectors.fillcheck:run"
    deadline_factor = 12.0      # two runs when clean; 3 + one per buffer when something is found
    explains_fault = ends_process = False
    sees = (UNINIT_READ, UNWRITTEN)

    def ran(self, ev: Evidence) -> DetectorRun:
        report = ev.of(UNINIT)
        return DetectorRun(UNINIT, report is not None, checked_outputs(report) if report is not None else "not run")

    def findings(self, ev: Evidence) -> list[Finding]:
        report = ev.of(UNINIT)
        if report is None:
            return []
        return never_written_findings(report, ev.result.buffers, kernel=ev.result.kernel, arch=ev.result.arch,
                                      describe=ev.describe)


DETECTOR = UninitDetector()


def never_written_findings(uninit: Mapping[str, Any], buffers: Sequence[Mapping[str, Any]], *, kernel: str = "",
                           arch: str = "", describe: Describe | None = None) -> list[Finding]:
    """Bytes nobody wrote that mattered: output bytes the kernel left unwritten (UNWRITTEN) and reads of
    never-written bytes that changed an output (UNINIT_READ), by buffer and region."""
    layouts = {b["name"]: L.GuardLayout.from_json(b["layout"]) for b in buffers}
    fills = "/".join(f"{v:#04x}" for v in uninit.get("fills", ()))
    noise = _noise(uninit)
    out: list[Finding] = []
    for name, runs in uninit.get("unwritten", {}).items():
        note = (f"output bytes the kernel never wrote: they still held the fill ({fills}) after every run{noise}")
        out += _by_region(UNWRITTEN, name, runs, layouts.get(name), kernel, arch, note, describe)
    for name, read in uninit.get("read", {}).items():
        note = (f"the kernel read bytes of {name} that nobody wrote: changing only their fill changed "
                f"{_effects(read.get('effects', {}))}{noise}")
        if uninit.get("read_fill") is not None:
            note += (f" (seen with fill {uninit['read_fill']:#04x}: with {fills} every result was the same, as for "
                     f"a bool, an index range check or a min over negative values)")
        if read.get("written_later"):
            note += "; some were read before a later write (they hold results at the end)"
        if read.get("bounded"):
            note += ("; a bound: the first and the last byte that matter of each piece, found by changing the fill "
                     "of parts of the buffer (bytes between them are kept; bytes read whose effect did not reach a "
                     "result, such as one overwritten later, cannot be seen)")
        out += _by_region(UNINIT_READ, name, read.get("ranges", []), layouts.get(name), kernel, arch, note, describe,
                          exact=not read.get("bounded"))
    if uninit.get("unexplained"):
        note = (f"results depend on bytes nobody wrote, but no single buffer's fill explains it: "
                f"{_effects(uninit['unexplained'])}{noise}")
        out.append(Finding(detector=UNINIT, kind=UNINIT_READ, buffer=UNKNOWN_BUFFER, region="inside", bytes=0,
                           kernel=kernel, arch=arch, note=note, exact=False))
    return out


def _by_region(kind: str, name: str, runs: Sequence[Sequence[int]], layout: L.GuardLayout | None, kernel: str,
               arch: str, note: str, describe: Describe | None, exact: bool = True) -> list[Finding]:
    spans = L.merge_runs((int(s), int(e)) for s, e in runs)
    if not spans:   # its bytes were overwritten after they were read: which ones is not known
        return [Finding(detector=UNINIT, kind=kind, buffer=name, region="inside", bytes=0, kernel=kernel, arch=arch,
                        note=note + "; the bytes read were overwritten later, so which ones is not known", exact=False)]
    if layout is None:
        ranges = [ByteRange("inside", s, e) for s, e in spans]
    else:
        ranges = L.ranges_from_offsets(layout, spans)
    by_class: dict[str, list[ByteRange]] = defaultdict(list)
    for r in ranges:
        logical = describe(name, r.start, r.end) if describe else ""
        by_class[L.region_class(r.region)].append(ByteRange(r.region, r.start, r.end, logical))
    return [Finding(detector=UNINIT, kind=kind, buffer=name, region=region, bytes=sum(r.nbytes for r in rs),
                    count=len(rs), kernel=kernel, arch=arch, ranges=tuple(rs), note=note, exact=exact,
                    details=(("zone", ", ".join(sorted({r.region for r in rs}))),))
            for region, rs in by_class.items()]


def _effects(effects: Mapping[str, Mapping[str, Any]]) -> str:
    parts = []
    for name, what in sorted(effects.items()):
        if "elements" in what:
            parts.append(f"{name.removeprefix('output:')}: {what['elements']} of {what['of']} elements")
        else:
            spans = [f"{s}..{e - 1}" for s, e in what.get("ranges", [])[:4]]
            more = ", ..." if len(what.get("ranges", [])) > 4 else ""
            parts.append(f"{name} bytes {', '.join(spans)}{more} ({what['bytes']} B)")
    return "; ".join(parts) or "nothing recorded"


def _noise(uninit: Mapping[str, Any]) -> str:
    noisy = uninit.get("nondeterministic") or {}
    if not noisy:
        return ""
    counts = ", ".join(f"{k.removeprefix('output:')}: {v}" for k, v in sorted(noisy.items()))
    scales = uninit.get("noise_scale") or {}
    floats = (f"; floating-point differences counted only beyond {NOISE_FACTOR:g}x the run-to-run scale ("
              + ", ".join(f"{k.removeprefix('output:')}: {v if isinstance(v, str) else f'{v:.3g}'}"
                          for k, v in sorted(scales.items())) + ")") if scales else ""
    return f" (not judged: bytes or elements that differ between two runs with the same fill: {counts}{floats})"


def checked_outputs(uninit: Mapping[str, Any]) -> str:
    """What the unwritten-output check covered, for the detector line of a report."""
    outputs = list(uninit.get("outputs", ()))
    if not outputs:
        return "no declared outputs (RunInfo.outputs): unwritten outputs not checked; reads of never-written bytes were"
    return f"{uninit.get('runs', 0)} runs, fills {'/'.join(f'{v:#04x}' for v in uninit.get('fills', ()))}; outputs {', '.join(outputs)}"
