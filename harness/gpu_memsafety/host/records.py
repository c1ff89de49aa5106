"""memcheck records of a host-suite child -> findings per test, each naming the allocation it hit or missed.

Which test: the child marks the end of collection and of each test in the sanitizer's own output with a fence, a
CUDA call that fails on purpose (`cudaSetDevice` with an invalid ordinal, after a synchronize), which memcheck records
as an API error in order with the memory-access records before it. Records between fence k and fence k+1 belong to
the k-th test; records after the last fence to the test the child was running when it ended. When the fences in the
XML do not match the tests that ended (a sanitizer that does not record the call), records are placed by address
instead: an allocation is alive from the test that made it to the test that freed it, and a record that only one
test's live allocations can explain is that test's; the others' tests are rerun one per child (`alone`).

Which allocation: the one holding the address, else the nearest whose end (or start) it is within reach of
(gpu_memsafety.sanitizer.attribute), among the allocations alive during that test, every one an exact cudaMalloc
(the shim's exact placement, the caching allocator off), so the bytes past the end are the bytes memcheck saw.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from gpu_memsafety.host.allocations import allocation_details
from gpu_memsafety.host.launches import TensorUse
from gpu_memsafety.model import Finding
from gpu_memsafety.placement import layout as L
from gpu_memsafety.host.allocator import BEFORE_TESTS, Allocation
from gpu_memsafety.sanitizer import attribute
from gpu_memsafety.sanitizer.parse import API_ERROR, MEMORY_ACCESS, SanitizerRecord

FENCE_API = "cudaSetDevice"
FENCE_RESULT = 101               # cudaErrorInvalidDevice
COLLECTION = "(collection)"


def is_fence(rec: SanitizerRecord) -> bool:
    if rec.category != API_ERROR:
        return False
    words = f"{rec.api} {rec.text} {rec.error}"
    return FENCE_API in words and (rec.result == FENCE_RESULT or "invalid device ordinal" in words.lower()
                                   or "InvalidDevice" in words)


@dataclass
class Attributed:
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    alone: list[str] = field(default_factory=list)      # tests whose records could not be told apart
    how: str = ""                                       # "fences" or "addresses", and why


def attribute_records(records: Sequence[SanitizerRecord], order: Sequence[str], ended: Sequence[str],
                      allocations: Sequence[Allocation], *, arch: str = "",
                      uses: Mapping[str, Sequence[TensorUse]] | None = None) -> Attributed:
    """`order`: the tests that started, in order; `ended`: those that ended (fenced) in order; `uses`: each test's
    Triton launches' tensor arguments (host/launches.py), which name the allocation a finding hit."""
    uses = uses or {}
    from gpu_memsafety.sanitizer.records import _access   # the one place a record becomes an access
    accesses = [(rec, _access(rec)) for rec in records if rec.category == MEMORY_ACCESS and not rec.unplaceable]
    fences = [i for i, rec in enumerate(records) if is_fence(rec)]
    life = _lifetimes(order, allocations)
    out = Attributed()
    if len(fences) == len(ended) + 1:
        out.how = f"fences: {len(fences)} in the sanitizer's output, one per test end and one after collection"
        segments = _segments(records, fences, list(ended), order)
        for test, recs in segments.items():
            accs = [attribute.Access(**_fields(a)) for r, a in accesses if id(r) in recs]
            _place(out, test, accs, [a for a in allocations if test in life.get(a.id, ())], arch, uses.get(test, ()))
        return out
    out.how = (f"addresses: {len(fences)} fence record(s) for {len(ended)} test end(s) (+1 after collection) do not "
               f"match, so records are placed by the allocations alive in each test")
    by_test: dict[str, list[attribute.Access]] = {}
    for _, acc in accesses:
        tests = _candidates(acc, allocations, life, order)
        if len(tests) == 1:
            by_test.setdefault(tests[0], []).append(acc)
        else:
            out.alone.extend(t for t in tests if t not in out.alone)
    for test, accs in by_test.items():
        _place(out, test, accs, [a for a in allocations if test in life.get(a.id, ())], arch, uses.get(test, ()))
    return out


def _fields(acc: attribute.Access) -> dict[str, object]:
    return {k: getattr(acc, k) for k in ("address", "size", "direction", "kernel", "thread", "block", "source",
                                         "misaligned", "text")}


def _segments(records: Sequence[SanitizerRecord], fences: list[int], ended: list[str],
              order: Sequence[str]) -> dict[str, set[int]]:
    """Record ids per test: before the first fence: collection; between fence k and k+1: the k-th test ended;
    after the last: the test still running when the child ended (if any)."""
    running = [t for t in order if t not in ended]
    owners = [COLLECTION, *ended, running[-1] if running else COLLECTION]
    out: dict[str, set[int]] = {}
    segment = 0
    for i, rec in enumerate(records):
        if segment < len(fences) and i == fences[segment]:
            segment += 1
            continue
        out.setdefault(owners[segment], set()).add(id(rec))
    return out


def _lifetimes(order: Sequence[str], allocations: Sequence[Allocation]) -> dict[int, tuple[str, ...]]:
    """Allocation id -> the tests during which it was allocated (from the one that made it to the one that freed it).

    A free the allocator did not see (`freed_in` empty: the block went back after the child's last record of it)
    would keep an allocation alive to the child's end, and a later test's record at a reused address would be placed
    on it (explore's variants make this common: a variant's tensor sits where the previous variant's was). The driver
    never hands out bytes that are still allocated, so an allocation whose bytes a later one takes was freed before
    that one was made: where that was in a later test, it is not alive in that test any more."""
    index = {t: i for i, t in enumerate(order)}

    def made(a: Allocation) -> int:
        return -1 if a.test == BEFORE_TESTS else index.get(a.test, -1)

    out = {}
    ends = _taken_over(allocations, made)
    for a in allocations:
        first = made(a)
        last = index.get(a.freed_in, len(order) - 1) if a.freed_in else len(order) - 1
        if a.id in ends and ends[a.id] > first:
            last = min(last, ends[a.id] - 1)
        out[a.id] = tuple(order[max(first, 0): last + 1])
    return out


def _taken_over(allocations: Sequence[Allocation], made: Any) -> dict[int, int]:
    """Allocation id -> the earliest test index at which a later allocation (a higher id: the shim counts them in
    order) on the same device took any of its bytes. Pairs are found by address, sorted: O(n log n + pairs)."""
    import bisect
    ends: dict[int, int] = {}
    by_device: dict[int, list[Allocation]] = {}
    for a in allocations:
        if a.size > 0:
            by_device.setdefault(a.device, []).append(a)
    for group in by_device.values():
        group.sort(key=lambda a: a.ptr)
        ptrs = [a.ptr for a in group]
        for x in group:
            # every y starting inside x overlaps it; every overlapping pair has one start inside the other
            for y in group[bisect.bisect_left(ptrs, x.ptr): bisect.bisect_left(ptrs, x.ptr + x.size)]:
                if y is x:
                    continue
                early, late = (x, y) if x.id < y.id else (y, x)
                at = made(late)
                ends[early.id] = min(ends.get(early.id, at), at)
    return ends


def _candidates(acc: attribute.Access, allocations: Sequence[Allocation], life: dict[int, tuple[str, ...]],
                order: Sequence[str]) -> list[str]:
    # memcheck reports an access outside every allocation alive at the time: one that holds the address was not
    # alive then (freed before, or made after), so it explains nothing
    refs = [_ref(a, "") for a in allocations if a.size > 0 and not a.ptr <= acc.address < a.ptr + a.size]
    hit = attribute.locate(acc.address, refs)
    if hit is None:
        return list(order) if len(order) != 1 else [order[0]]
    same = [a for a in allocations if a.ptr == hit.tensor_addr and a.size == hit.nbytes]
    tests: list[str] = []
    for a in same:
        tests += [t for t in life.get(a.id, ()) if t not in tests]
    return tests


def _ref(alloc: Allocation, test: str, name: str = "") -> attribute.BufferRef:
    return attribute.BufferRef(test, name or alloc.label, alloc.ptr, alloc.size, alloc.ptr, alloc.size,
                               L.GuardLayout(alloc.size, 0, 0, L.EXACT))


def names(allocations: Sequence[Allocation]) -> dict[int, str]:
    """Allocation id -> its finding's buffer name: its label, numbered in allocation order where several live
    allocations share one (a helper that allocates every tensor of a test on one line), so that their findings are
    neither merged nor named after each other."""
    by_label: dict[str, list[Allocation]] = {}
    for a in sorted(allocations, key=lambda a: a.id):
        by_label.setdefault(a.label, []).append(a)
    out = {}
    for label, same in by_label.items():
        for k, a in enumerate(same, 1):
            out[a.id] = label if len(same) == 1 else f"{label} (#{k} of {len(same)})"
    return out


def _place(out: Attributed, test: str, accesses: list[attribute.Access], alive: list[Allocation], arch: str,
           uses: Sequence[TensorUse] = ()) -> None:
    if not accesses:
        return
    alive = [a for a in alive if a.size > 0]
    named = names(alive)
    refs = [_ref(a, test, named[a.id]) for a in alive]
    found = attribute.aggregate(accesses, refs, arch=arch, stray_case=test)
    by_name = {named[a.id]: a for a in alive}
    for finding in found.get(test, []):
        alloc = by_name.get(finding.buffer)
        if alloc is not None:
            finding = replace(finding, details=finding.details + allocation_details(alloc, test, uses, finding.kernel))
        out.findings.setdefault(test, []).append(finding)
