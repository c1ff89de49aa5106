"""The real upstream kernels on the CPU: sglang's pre-dispatch build command line and host-side contracts,
the triton_kernels copies x pad policies of the last-expert scenario, and the per-architecture expectations.

The sglang build test compiles the real .cuh (from .vendor/, `make upstream`) with nvcc for sm_90a and calls
the host wrapper with CPU tensors: its stride/contiguity checks run before any launch, so each version's
refusal of the other version's layout is checked here without a GPU. It skips, saying why, where .vendor/,
nvcc or apache-tvm-ffi is missing.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpu_memsafety.upstream import catalogue as U
from gpu_memsafety.model import TRACE, GUARD, MEMCHECK, POISON
from gpu_memsafety.kernels.mxfp4 import layout as ML
from gpu_memsafety.kernels.pre_dispatch import layout as PL
from gpu_memsafety.kernels.pre_dispatch import sglang as S
from gpu_memsafety.scenarios import last_expert_oob_read as LE
from gpu_memsafety.scenarios import padded_stride_scale_write as PSW

TC = S.Toolchain(nvcc="/cuda/bin/nvcc", cxx="g++", cudart="/cuda/lib64/libcudart.so",
                 tvm_includes=("/tvm/include", "/tvm/dlpack"), tvm_lib_dir="/tvm/lib", tvm_lib_name="tvm_ffi")


# --- sglang pre-dispatch: how it is built ---------------------------------------------------------------
def test_compile_command_uses_sglangs_flags_for_sm90a() -> None:
    cmd = S.compile_command(TC, (9, 0), Path("/v/sglang/kernels/jit/include"), Path("cuda.cu"), Path("cuda.o"))
    assert cmd[0] == "/cuda/bin/nvcc"
    for flag in ("-gencode=arch=compute_90a,code=sm_90a", "-DSGL_CUDA_ARCH=900", "-std=c++20", "-O3",
                 "--expt-relaxed-constexpr", "-I/tvm/include", "-I/tvm/dlpack", "-I/v/sglang/kernels/jit/include"):
        assert flag in cmd
    assert cmd[cmd.index("-Xcompiler") + 1] == "-fPIC" and cmd[-4:] == ["-c", "cuda.cu", "-o", "cuda.o"]
    assert S.arch_target((10, 0)) == "100a" and S.arch_target((8, 0)) == "80"


def test_link_command_links_tvm_ffi_and_cudart() -> None:
    cmd = S.link_command(TC, Path("cuda.o"), Path("m.so"))
    assert cmd[:3] == ["g++", "cuda.o", "-shared"]
    assert {"-L/tvm/lib", "-ltvm_ffi", "/cuda/lib64/libcudart.so"} <= set(cmd) and cmd[-2:] == ["-o", "m.so"]


def test_wrapper_exports_run_as_sglangs_load_jit_does() -> None:
    text = S.wrapper_source(Path("/v/mega_moe_pre_dispatch.cuh"))
    assert "#include <tvm/ffi/function.h>" in text and '#include "/v/mega_moe_pre_dispatch.cuh"' in text
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, (MegaMoEPreDispatchKernel<32, true>::run));" in text


def test_a_missing_version_or_toolchain_is_unsupported_with_what_was_needed(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    from gpu_memsafety.errors import Unsupported

    monkeypatch.setenv(U.VENDOR_ENV, str(tmp_path))
    with pytest.raises(Unsupported, match=r"sglang 0.5.18 is not unpacked in .vendor/sglang-0.5.18: run `make upstream`"):
        S.source_dir("0.5.18")
    monkeypatch.setattr(U, "installed_version", lambda dist: "0.1.9")
    with pytest.raises(Unsupported, match=r"needs apache-tvm-ffi==0.1.11 .* found 0.1.9"):
        S.toolchain()
    S.check_cxx20.cache_clear()
    with pytest.raises(Unsupported, match=r"needs a host C\+\+ compiler with C\+\+20 .* `/bin/false"):
        S.check_cxx20("/bin/false")
    with pytest.raises(Unsupported, match="needs the CUDA runtime library"):
        S.find_cudart(tmp_path / "bin" / "nvcc", str(tmp_path), system_roots=())
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libcudart.so.13").touch()
    assert S.find_cudart(tmp_path / "bin" / "nvcc", None, system_roots=()) == str(tmp_path / "lib64" / "libcudart.so.13")


def _real_build_prerequisites() -> str | None:
    missing = [v for v in PL.SGLANG_VERSIONS if U.unpacked(U.artifact(f"sglang-{v}")) is None]
    if missing:
        return f"sglang {', '.join(missing)} not in .vendor/ (run `make upstream`)"
    if U.tvm_ffi_problem():
        return str(U.tvm_ffi_problem())
    if not shutil.which("nvcc"):
        return "no nvcc on PATH"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("version", PL.SGLANG_VERSIONS)
def test_real_sglang_kernel_builds_and_refuses_the_other_layout_on_the_cpu(version: str) -> None:
    reason = _real_build_prerequisites()
    if reason:
        pytest.skip(reason)
    torch = pytest.importorskip("torch")
    library = S.build(version, (9, 0))
    assert library.is_file() and S.build(version, (9, 0)) == library          # second call: the cache
    module = S.load(version, (9, 0))
    hidden, nt, pm, g = 2304, 5, 8, 72
    alloc = torch.zeros(pm * 80 // 4, dtype=torch.int32)
    views = {"contiguous": alloc.as_strided((pm, g // 4), (g // 4, 1)),
             "padded": alloc.as_strided((pm, g // 4), (80 // 4, 1))}
    other = "padded" if PL.sglang_mode(version) == "packed" else "contiguous"
    args = (torch.zeros(nt, hidden, dtype=torch.bfloat16), torch.zeros(nt, 8, dtype=torch.int32),
            torch.zeros(nt, 8), torch.zeros(pm, hidden, dtype=torch.int8))
    with pytest.raises(RuntimeError) as info:
        module.run(*args, views[other], torch.zeros(pm, 8, dtype=torch.int64), torch.zeros(pm, 8))
    assert S.refusal_matches(version, str(info.value)), str(info.value)


# --- padded-stride scenario: the real kernel's cases ----------------------------------------------------------
def _psw(impl: str, variant: str, hidden: int = 2304, nt: int = 5, pm: int = 8):
    return next(c for c in PSW.SCENARIO.build() if c.params["impl"] == impl and c.variant == variant
                and (c.params["hidden"], c.params["num_tokens"], c.params["padded_max"]) == (hidden, nt, pm))


def test_sglang_0518_is_expected_to_write_exactly_what_our_packed_model_writes() -> None:
    real, model = _psw("sglang-0.5.18", "packed"), _psw("cuda", "packed")
    assert PSW.SCENARIO.expect(real).findings[0].ranges == PSW.SCENARIO.expect(model).findings[0].ranges
    f = PSW.SCENARIO.expect(real).findings[0]
    assert (f.detectors, f.bytes, f.upstream) == ((GUARD, TRACE), 32, "sgl-project/sglang#36237")
    assert PSW.SCENARIO.expect(_psw("sglang-0.5.18", "packed", hidden=2560)).clean
    assert PSW.SCENARIO.expect(_psw("sglang-0.5.19", "strided")).clean
    assert not any(c.variant != "strided" for c in PSW.SCENARIO.build()
                   if c.params["impl"] == "sglang-0.5.19" and c.variant != "refusal")


def test_refusal_contract_cases_expect_the_kernels_own_message() -> None:
    for version, message in PL.SGLANG_REFUSALS.items():
        case = _psw(f"sglang-{version}", "refusal")
        expectation = PSW.SCENARIO.expect(case)
        assert expectation.clean and repr(message) in expectation.reason
    assert PSW._allocated_stride(_psw("sglang-0.5.19", "refusal")) == 72       # a packed (pre-fix) allocation
    assert PSW._allocated_stride(_psw("sglang-0.5.18", "refusal")) == 80


def test_every_case_names_its_upstream_source_and_version() -> None:
    for case in PSW.SCENARIO.build() + LE.SCENARIO.build():
        assert case.params["upstream"], case.id
    assert _psw("sglang-0.5.18", "packed").params["upstream"] == "sglang 0.5.18"
    assert PSW.SCENARIO.kernel(_psw("sglang-0.5.19", "strided")) == "mega_moe_pre_dispatch_kernel [sglang 0.5.19]"
    c = next(c for c in LE.SCENARIO.build() if c.params["tk"] == "C")
    assert c.params["upstream"] == "triton_kernels from sglang-kernel 0.4.6.post1"
    assert LE.SCENARIO.kernel(c) == "_matmul [triton_kernels from sglang-kernel 0.4.6.post1]"


# --- last-expert scenario: copies x pads x architectures -----------------------------------------------------
def _le(tk: str, variant: str, label: str = "K2880-E4-N256"):
    return next(c for c in LE.SCENARIO.build() if c.params["tk"] == tk and c.variant == variant
                and c.label == f"tk{tk}-{label}")


def test_every_copy_runs_every_pad_policy_on_every_shape() -> None:
    cases = LE.SCENARIO.build()
    for tk in ("A", "C", "D"):
        for pad in ML.PAD_POLICIES:
            assert len([c for c in cases if c.params["tk"] == tk and c.params["pad"] == pad
                        and not c.variant.startswith("batched")]) == 16


def test_sm90_expects_the_overread_unpadded_and_clean_under_both_pads() -> None:
    for tk in ("A", "C"):
        e = LE.SCENARIO.expectation(_le(tk, "unpadded"), "sm_90")
        assert [(f.buffer, f.region, f.upstream) for f in e.findings] == [("w_scale", "past_end", "triton-lang/triton#10772")]
        assert POISON in e.findings[0].detectors and MEMCHECK in e.findings[0].detectors
        assert LE.SCENARIO.expectation(_le(tk, "padded"), "sm_90").clean
        assert LE.SCENARIO.expectation(_le(tk, "padded_vllm"), "sm_90").clean
        assert LE.SCENARIO.expectation(_le(tk, "unpadded", "sweep-K3072-E4-N256"), "sm_90").clean
    d = LE.SCENARIO.expectation(_le("D", "unpadded"), "sm_90").findings[0]
    assert POISON not in d.detectors and MEMCHECK in d.detectors         # D masks the values, not the load
    assert "vLLM PR #47910" in LE.SCENARIO.expectation(_le("A", "padded_vllm"), "sm_90").reason


def test_sm100_is_clean_by_construction_and_other_archs_report_what_they_find() -> None:
    e = LE.SCENARIO.expectation(_le("A", "unpadded"), "sm_100")
    assert e.clean and "BlackwellMXScaleLayout" in e.reason and "multiple of 8" in e.reason
    other = LE.SCENARIO.expectation(_le("C", "unpadded"), "sm_89")
    assert other.clean and "no expectation recorded for sm_89" in other.reason and "reports what it finds" in other.reason
    assert LE.SCENARIO.expectation(_le("A", "unpadded"), "") == LE.SCENARIO.expect(_le("A", "unpadded"))
    assert LE.SCENARIO.expectation(_le("A", "unpadded"), "cpu") == LE.SCENARIO.expect(_le("A", "unpadded"))


def test_pad_policies_pad_to_the_same_groups_with_different_fills() -> None:
    assert ML.pad_groups("none", 2880) is None
    assert ML.pad_groups("sglang", 2880) == (92, 127)
    assert ML.pad_groups("vllm", 2880) == (92, 0)
    for K in LE.SWEEP_K:
        assert ML.pad_groups("sglang", K)[0] == ML.pad_groups("vllm", K)[0] == ML.padded_groups(K)
    with pytest.raises(ML.LayoutError, match="unknown pad policy 'zero'"):
        ML.pad_groups("zero", 2880)


def test_copy_d_is_not_applicable_with_the_triton_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy made for a newer triton does not apply to this machine: not applicable (a skip), never a failure."""
    import importlib.metadata as metadata

    from gpu_memsafety.errors import NotApplicable
    from gpu_memsafety.kernels.mxfp4 import adapter

    monkeypatch.setattr(metadata, "version", lambda dist: "3.6.0")
    with pytest.raises(NotApplicable, match=r"triton_kernels from sglang-kernel 0.4.10: needs triton >= 3.8, found 3.6.0"):
        adapter.locate("D")


def test_a_copy_not_unpacked_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpu_memsafety.errors import Unsupported
    from gpu_memsafety.kernels.mxfp4 import adapter

    from gpu_memsafety.errors import NotApplicable

    monkeypatch.setenv(U.VENDOR_ENV, str(tmp_path))
    with pytest.raises(Unsupported, match=r"sglang-kernel 0.4.6.post1 is not unpacked .* run `make upstream`") as info:
        adapter.locate("C")
    assert not isinstance(info.value, NotApplicable)   # it should run here and could not: fails a GPU runner
