"""`make upstream` for kernels inside big wheels: one header and what it includes, not the library around it."""
from __future__ import annotations

import zipfile
from pathlib import Path

from gpu_memsafety.cli import upstream as U
from gpu_memsafety.upstream import catalogue as C

INC = C.VLLM_DG_INCLUDE
FILES = {
    C.VLLM_DG_METADATA: '#pragma once\n#include <deep_gemm/common/math.cuh>\n  #  include "../ptx/utils.cuh"\n'
                        '#include <cuda/std/cstdint>\n#if 0\n#include <cute/config.hpp>\n#endif\n',
    INC + "deep_gemm/common/math.cuh": '#include "types.cuh"\n#include <cutlass/cutlass.h>\n',
    INC + "deep_gemm/common/types.cuh": "// leaf\n",
    INC + "deep_gemm/ptx/utils.cuh": "#include <cuda_bf16.h>\n#include <deep_gemm/common/math.cuh>\n",
    INC + "cute/config.hpp": "// guarded out, still taken\n",
    INC + "cutlass/cutlass.h": "// cutlass\n",
    INC + "cute/arch/mma_sm90_gmma_ext.hpp": "// 2.8 MB nobody includes\n",
    INC + "deep_gemm/impls/sm100_bf16_gemm.cuh": "// another kernel\n",
    C.VLLM_CACHE_UTILS: "# triton\n",
    "vllm/engine/big.py": "x = 1\n",
}


def wheel(tmp_path: Path, files: dict[str, str]) -> Path:
    path = tmp_path / "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def test_include_closure_follows_quotes_angles_relative_paths_and_guarded_includes():
    names = list(FILES)
    got = U.include_closure(names, lambda n: FILES[n].encode(), [C.VLLM_DG_METADATA], [INC])
    assert got == sorted([C.VLLM_DG_METADATA, INC + "deep_gemm/common/math.cuh", INC + "deep_gemm/common/types.cuh",
                          INC + "deep_gemm/ptx/utils.cuh", INC + "cute/config.hpp", INC + "cutlass/cutlass.h"])


def test_a_vllm_artifact_unpacks_the_triton_file_and_the_header_closure_only(tmp_path: Path, monkeypatch):
    import hashlib
    art = U.artifact("vllm-0.33.0")
    made = wheel(tmp_path, FILES)
    # the stand-in wheel's own hash is pinned for this test (the real pin would refuse it, as it should)
    monkeypatch.setitem(U.WHEEL_SHA256, made.name, hashlib.sha256(made.read_bytes()).hexdigest())
    folder = U.extract(art, made, tmp_path / "vendor")
    got = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != U.STAMP)
    assert C.VLLM_CACHE_UTILS in got and C.VLLM_DG_METADATA in got and INC + "cutlass/cutlass.h" in got
    assert INC + "cute/arch/mma_sm90_gmma_ext.hpp" not in got and "vllm/engine/big.py" not in got
    assert (folder / U.STAMP).read_text().splitlines()[2] == f"{len(got)} files"


def test_the_new_artifacts_are_pinned_and_gpu_only():
    for key, dist, version in (("vllm-0.27.1", "vllm", "0.27.1"), ("vllm-0.33.0", "vllm", "0.33.0"),
                               ("flashinfer-0.7.1", "flashinfer-python", "0.7.1"),
                               ("flashinfer-0.7.2", "flashinfer-python", "0.7.2")):
        art = U.artifact(key)
        assert (art.dist, art.version, art.gpu_only) == (dist, version, True)
        assert art.folder == f"{dist}-{version}" and art.closure
    assert U.artifact("flashinfer-0.7.1").wheel_prefix == "flashinfer_python-0.7.1-"
