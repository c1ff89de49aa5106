"""A host-suite finding names the tensor as the code does (host/launches.py): the kernel's parameter it was handed as,
and the test's own variable, matched to the allocation by the first byte of its storage; allocations that share one
label are told apart; the bare flag runs the complete set (detectors/suite_modes.py, the one table)."""
from __future__ import annotations

import sys
import types
from typing import Any

from gpu_memsafety.detectors import suite_modes as modes
from gpu_memsafety.host.children import AUTOTUNE_CACHE, child_env, reuse_caches
from gpu_memsafety.host.evidence import Evidence
from gpu_memsafety.host.judge import suite_evidence
from gpu_memsafety.judge.decide import decide
from gpu_memsafety.judge.suite import OwnResult
from gpu_memsafety.host.launches import LaunchLog, TensorUse, name_of
from gpu_memsafety.host.records import attribute_records
from gpu_memsafety.model import GUARD, GUARD_PAGE, MEMCHECK, TRACE, TRACE_RACE, CaseResult
from gpu_memsafety.host.allocator import Allocation, Frame, GuardHit

from tests.host.test_host_records import FENCE, access, xml

T = "t.py::test_gemm"


def judge(ev: Evidence, own: OwnResult, marker: Any = None) -> CaseResult:
    """One test's verdict, as the host path asks for it: its evidence through the one decision."""
    return decide(suite_evidence(ev, own, marker))


class FakeStorage:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


class FakeTensor:
    """What storage_ptr reads of a torch tensor: is_cuda and untyped_storage().data_ptr()."""

    is_cuda = True

    def __init__(self, ptr: int) -> None:
        self._storage = FakeStorage(ptr)

    def untyped_storage(self) -> FakeStorage:
        return self._storage


def test_the_bare_flag_runs_the_complete_set_in_one_sanitized_pass() -> None:
    assert modes.DEFAULT == modes.COMPLETE
    assert modes.COMPLETE in modes.CHILD_MODES and modes.COMPLETE in modes.SANITIZED
    assert modes.PLACEMENT_OF[modes.COMPLETE] == "exact"
    # the complete set sees reads: an expectation of an overread is checkable there, not under markers
    assert "memcheck" in modes.DETECTORS_OF[modes.COMPLETE]


def test_the_mode_table_spells_the_detectors_as_the_model_does() -> None:
    assert {d for ds in modes.DETECTORS_OF.values() for d in ds} <= {GUARD, MEMCHECK, GUARD_PAGE, TRACE, TRACE_RACE}
    assert set(modes.DETECTORS_OF) == set(modes.MODES) == set(modes.PLACEMENT_OF)
    # what runs without a GPU is a mode of its own that needs none, and the judge knows what each detector sees
    assert set(modes.WITHOUT_GPU) <= modes.NEEDS_GPU and not set(modes.WITHOUT_GPU.values()) & modes.NEEDS_GPU
    from gpu_memsafety.detectors.registry import UNITS
    assert all(UNITS[d].sees for ds in modes.DETECTORS_OF.values() for d in ds)


def test_sanitized_children_reuse_caches_and_keep_a_users_choice() -> None:
    env = child_env({"PATH": "/bin", "TRITON_CACHE_DIR": "/c"}, gpu="0", mode=modes.COMPLETE)
    assert env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1" and env[AUTOTUNE_CACHE] == "1"
    assert env["TRITON_CACHE_DIR"] == "/c"            # the parent's cache, never redirected
    assert reuse_caches({AUTOTUNE_CACHE: "0"}) == {}    # the user said no: left as set


def _gemm_test(log: LaunchLog) -> None:
    a_s = FakeTensor(0x1000)
    b_scales = FakeTensor(0x9000)
    pair = (FakeTensor(0x5000), a_s)
    log.note("_gemm_kernel", ["a_s_ptr", "b_s_ptr", "out", "M"], (a_s, b_scales, FakeTensor(0x7000), 3), {},
             sys._getframe())
    del pair


def test_a_launch_names_each_tensor_argument_and_the_tests_variable() -> None:
    log = LaunchLog()
    log.begin(_gemm_test)
    _gemm_test(log)
    uses = log.take()
    by_param = {u.param: u for u in uses}
    assert set(by_param) == {"a_s_ptr", "b_s_ptr", "out"}          # M is no tensor
    assert by_param["a_s_ptr"].variables == ("a_s", "pair")
    assert by_param["b_s_ptr"].variables == ("b_scales",)
    assert by_param["out"].variables == ()                         # a temporary: no name in the test
    assert log.take() == []                                        # taken once
    assert name_of(0x9000, uses, "_gemm_kernel") == "kernel argument `b_s_ptr` of _gemm_kernel; test variable `b_scales`"
    assert name_of(0x4242, uses) == ""


def test_name_of_prefers_the_findings_own_kernel() -> None:
    uses = [TensorUse("fill", "dst", 0x10), TensorUse("copy", "src", 0x10, ("x",))]
    assert name_of(0x10, uses, "copy") == "kernel argument `src` of copy; test variable `x`"
    assert name_of(0x10, uses, "other") == "kernel argument `dst` of fill, `src` of copy; test variable `x`"


# Two scale tensors made by one helper line: the same label. The read past b_s must be b_s's, not a_s's.
ALLOCS = [Allocation(1, 64, 0, T, (Frame("/s/util.py", 7, "scales"),), 0x10000),
          Allocation(2, 64, 0, T, (Frame("/s/util.py", 7, "scales"),), 0x20000)]
USES = {T: [TensorUse("_gemm_kernel", "a_s_ptr", 0x10000, ("a_s",)), TensorUse("_gemm_kernel", "b_s_ptr", 0x20000, ("b_s",))]}


def test_a_memcheck_finding_names_the_tensor_it_hit() -> None:
    records = xml(FENCE, access(0x20000 + 64, size=8), FENCE)
    out = attribute_records(records, [T], [T], ALLOCS, arch="sm_90", uses=USES)
    (f,) = out.findings[T]
    assert (f.region, f.bytes) == ("past_end", 8)
    assert f.buffer == "alloc 64 B at util.py line 7 (#2 of 2)"
    assert f.detail("tensor") == "kernel argument `b_s_ptr` of _gemm_kernel; test variable `b_s`"
    result = judge(Evidence(T, modes.COMPLETE, "sm_90", findings=[f], allocated=2), OwnResult("passed"))
    assert "test variable `b_s`" in result.message


def test_allocations_sharing_a_label_are_not_merged_into_one_finding() -> None:
    records = xml(FENCE, access(0x10000 + 64), access(0x20000 + 68), FENCE)
    out = attribute_records(records, [T], [T], ALLOCS, uses=USES)
    named = sorted((f.buffer, f.detail("tensor").split(";")[0], f.ranges[0].start) for f in out.findings[T])
    assert named == [("alloc 64 B at util.py line 7 (#1 of 2)", "kernel argument `a_s_ptr` of _gemm_kernel", 64),
                     ("alloc 64 B at util.py line 7 (#2 of 2)", "kernel argument `b_s_ptr` of _gemm_kernel", 68)]


def test_a_marker_finding_names_the_tensor_too() -> None:
    alloc = Allocation(3, 4000, 0, T, (Frame("/s/t.py", 12, "test_gemm"),), 0x30000)
    hit = GuardHit(alloc, bytes([0xA5]) * 256, bytes([0]) * 4 + bytes([0xA5]) * 252, True)
    ev = Evidence(T, modes.MARKERS, "sm_90", hits=[hit], allocated=1,
                  tensors=[TensorUse("_fill", "dst", 0x30000, ("out",))])
    result = judge(ev, OwnResult("passed"))
    (f,) = result.findings
    assert f.detail("tensor") == "kernel argument `dst` of _fill; test variable `out`"
    assert Evidence.from_json(ev.to_json()).tensors == ev.tensors


def test_launch_log_wraps_triton_launches_only_once_triton_is_imported(monkeypatch: Any) -> None:
    seen: list[Any] = []

    class JITFunction:
        __name__ = "k"
        arg_names = ["x", "n"]

        def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> str:
            seen.append((args, warmup))
            return "launched"

    jit = types.ModuleType("triton.runtime.jit")
    jit.JITFunction = JITFunction                       # type: ignore[attr-defined]
    monkeypatch.delitem(sys.modules, "triton.runtime.jit", raising=False)
    log = LaunchLog()
    log.begin(None)
    assert log._restore is None                         # Triton not imported: nothing wrapped, nothing imported
    monkeypatch.setitem(sys.modules, "triton.runtime.jit", jit)
    monkeypatch.setitem(sys.modules, "triton.runtime", types.ModuleType("triton.runtime"))
    log.begin(None)
    assert JITFunction.run(JITFunction(), FakeTensor(0x40), 5, grid=(1,), warmup=False) == "launched"
    JITFunction.run(JITFunction(), FakeTensor(0x80), 5, grid=(1,), warmup=True)      # a compile, not a launch
    assert [(u.kernel, u.param, u.ptr) for u in log.take()] == [("k", "x", 0x40)]
    log.uninstall()
    JITFunction.run(JITFunction(), FakeTensor(0x40), 5, grid=(1,), warmup=False)
    assert log.take() == [] and len(seen) == 3


def test_a_straddling_access_reports_its_full_width() -> None:
    """An 8-byte load at +3996 of a 4,000-byte tensor: 4 B past the end are counted, and the finding says the access
    was 8 B wide and straddled the end (issue 41: the full width where the sanitizer gives it)."""
    alloc = [Allocation(1, 4000, 0, T, (Frame("/s/t.py", 3, "test_gemm"),), 0x50000)]
    (f,) = attribute_records(xml(FENCE, access(0x50000 + 3996, size=8), FENCE), [T], [T], alloc).findings[T]
    assert (f.bytes, f.ranges[0].start, f.ranges[0].end) == (4, 4000, 4004)
    assert f.detail("width") == ("8 B per access; the accesses span +3,996..+4,004 and straddle the tensor's end: "
                                 "4 B of them inside it, not counted")
    (g,) = attribute_records(xml(FENCE, access(0x50000 + 4000, size=16), FENCE), [T], [T], alloc).findings[T]
    assert (g.bytes, g.detail("width")) == (16, "16 B per access")       # a vector load wholly past the end
    (h,) = attribute_records(xml(FENCE, access(0x50000 + 4000, size=4), FENCE), [T], [T], alloc).findings[T]
    assert h.detail("width") == ""


def test_complete_folds_a_write_both_passes_saw_into_the_markers_bytes() -> None:
    """memcheck ends a kernel at its first bad store (4 of the 8 B a thread writes before the start); the markers
    pass saw all 8: one finding with the markers' bytes and memcheck's kernel and line."""
    from gpu_memsafety.judge.suite import fold
    from gpu_memsafety.model import ByteRange, Finding
    g = Finding("guard", "overwrite", "alloc 4000 B at t.py line 3", "before_start", 8,
                ranges=(ByteRange("before_start", -8, 0),), note="8 marker byte(s) changed")
    m = Finding("memcheck", "overwrite", "alloc 4000 B at t.py line 3 (#1 of 2)", "before_start", 4, kernel="_fill",
                source="t.py:9", ranges=(ByteRange("before_start", -4, 0),))
    r = Finding("memcheck", "overread", "alloc 4000 B at t.py line 3", "past_end", 4, kernel="_copy",
                ranges=(ByteRange("past_end", 4000, 4004),))
    far = Finding("memcheck", "overwrite", "alloc 4000 B at t.py line 3", "past_end", 4, kernel="_fill",
                  ranges=(ByteRange("past_end", 4400, 4404),))
    (read, one, beyond) = fold([m, r, g, far])
    assert (one.detector, one.bytes, one.kernel, one.source) == ("guard", 8, "_fill", "t.py:9")
    assert "memcheck saw 4 B of it by _fill (t.py:9)" in one.note
    assert read is r and beyond is far
