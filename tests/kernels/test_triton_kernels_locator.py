"""CPU tests of gpu_memsafety.kernels.mxfp4.triton_kernels_locator: the real triton_kernels is found, look-alikes are refused.

Fake packages live in tmp_path; each test states which sources it searches, so whatever this machine has
installed cannot decide the outcome. The vendored copy (what `make upstream` unpacks) is imported for
real: triton_kernels imports on the CPU with triton 3.6 (no GPU is touched at import).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import sys
from pathlib import Path

import pytest

from gpu_memsafety.errors import Unsupported
from gpu_memsafety.kernels.mxfp4 import triton_kernels_locator as loc
from repo_paths import ROOT as REPO

VENDORED = REPO / ".vendor" / "sgl-kernel-0.3.21" / "triton_kernels"
IMPOSTOR_INIT = "raise RuntimeError('the impostor was imported')\n"


@pytest.fixture(autouse=True)
def clean_imports():
    """Each test starts and ends with no triton_kernels imported and sys.path as it was."""
    saved_path = list(sys.path)
    saved = {n: m for n, m in sys.modules.items() if n == "triton_kernels" or n.startswith("triton_kernels.")}
    for name in saved:
        del sys.modules[name]
    yield
    sys.path[:] = saved_path
    for name in [n for n in sys.modules if n == "triton_kernels" or n.startswith("triton_kernels.")]:
        del sys.modules[name]
    sys.modules.update(saved)
    importlib.invalidate_caches()


def make_package(parent: Path, files: dict[str, str]) -> Path:
    pkg = parent / "triton_kernels"
    pkg.mkdir(parents=True)
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


def make_dist_info(site: Path, name: str, version: str, record: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in record))


GOOD_OGS = {"__init__.py": "", "matmul_ogs.py": "def matmul_ogs(x, w, bias, routing_data=None):\n    return x\n"}
GOOD_MATMUL = {"__init__.py": "", "matmul.py": "def matmul(a, b, bias):\n    return a\n"}


def needs_vendored_copy() -> None:
    if not (VENDORED / "__init__.py").is_file():
        pytest.skip(f"{VENDORED} is missing: run `make upstream`")


# --- refusing impostors ------------------------------------------------------------------------------------
def test_impostor_on_sys_path_is_refused_without_importing_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    pkg = make_package(site, {"__init__.py": IMPOSTOR_INIT, "kernels.py": "", "utils.py": ""})
    sys.path.insert(0, str(site))
    with pytest.raises(Unsupported) as info:
        loc.find_triton_kernels(env={}, repo_root=tmp_path / "repo", sources=("importable", "env", "vendor"))
    message = str(info.value)
    assert f"refused {pkg} (unknown, importable)" in message
    assert "neither triton_kernels/matmul_ogs.py defining matmul_ogs()" in message
    assert "nor triton_kernels/matmul.py defining matmul()" in message
    assert "it holds __init__.py, kernels.py, utils.py" in message
    assert "`triton-kernels` is an unrelated project" in message
    assert "make upstream" in message
    assert "triton_kernels" not in sys.modules


def test_impostor_names_the_wheel_that_installed_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    make_package(site, {"__init__.py": IMPOSTOR_INIT})
    make_dist_info(site, "triton-kernels", "0.1.0", ["triton_kernels/__init__.py"])
    with pytest.raises(Unsupported, match=r"\(triton-kernels 0\.1\.0, env\)"):
        loc.find_triton_kernels(env={loc.ENV_VAR: str(site)}, sources=("env",))


def test_files_decide_the_generation(tmp_path: Path) -> None:
    ogs = make_package(tmp_path / "a", GOOD_OGS)
    mm = make_package(tmp_path / "b", GOOD_MATMUL)
    both = make_package(tmp_path / "c", {**GOOD_OGS, **GOOD_MATMUL})
    name_only = make_package(tmp_path / "d", {"__init__.py": "", "matmul_ogs.py": "matmul_ogs = None\n"})
    no_init = tmp_path / "e" / "triton_kernels"
    no_init.mkdir(parents=True)
    (no_init / "matmul_ogs.py").write_text(GOOD_OGS["matmul_ogs.py"])
    assert loc.inspect_package(ogs) == loc.Inspection("matmul_ogs")
    assert loc.inspect_package(mm) == loc.Inspection("matmul")
    assert loc.inspect_package(both).api_gen == "matmul"
    assert loc.inspect_package(name_only).api_gen is None
    assert "not a regular package" in loc.inspect_package(no_init).reason
    assert loc.inspect_package(tmp_path / "missing").reason == "no such folder"


# --- finding the real one ----------------------------------------------------------------------------------
def test_vendored_copy_is_found_by_its_files() -> None:
    needs_vendored_copy()
    located = loc.find_triton_kernels(env={}, repo_root=REPO, sources=("vendor",), import_it=False)
    assert located.package_dir == VENDORED
    assert (located.api_gen, located.source, located.provenance) == ("matmul_ogs", "vendor", "sgl-kernel 0.3.21")
    assert located.module is None
    assert "triton_kernels" not in sys.modules


def test_vendored_copy_imports_on_the_cpu() -> None:
    needs_vendored_copy()
    located = loc.find_triton_kernels(env={}, repo_root=REPO, sources=("vendor",))
    assert located.module is not None and Path(located.module.__file__).parent == VENDORED
    assert callable(sys.modules["triton_kernels.matmul_ogs"].matmul_ogs)
    assert located.triton_version == importlib.metadata.version("triton")
    assert sys.path[0] == str(VENDORED.parent)


def test_env_path_may_name_the_folder_or_the_package(tmp_path: Path) -> None:
    pkg = make_package(tmp_path / "tk", GOOD_MATMUL)
    for value in (tmp_path / "tk", pkg):
        located = loc.find_triton_kernels(env={loc.ENV_VAR: str(value)}, sources=("env",), import_it=False)
        assert (located.package_dir, located.api_gen, located.source) == (pkg, "matmul", "env")
        assert located.provenance == f"{loc.ENV_VAR}={value}"


def test_search_goes_on_past_refused_candidates(tmp_path: Path) -> None:
    impostor = make_package(tmp_path / "bad", {"__init__.py": IMPOSTOR_INIT})
    repo = tmp_path / "repo"
    good = make_package(repo / ".vendor" / "sglang-kernel-0.4.10", GOOD_MATMUL)
    located = loc.find_triton_kernels(env={loc.ENV_VAR: str(tmp_path / "bad")}, repo_root=repo,
                                      sources=("env", "vendor"), import_it=False)
    assert (located.package_dir, located.provenance, located.api_gen) == (good, "sglang-kernel 0.4.10", "matmul")
    assert len(located.skipped) == 1 and located.skipped[0].startswith(f"refused {impostor}")


def test_vendor_provenance_prefers_the_dist_info(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    unpacked = repo / ".vendor" / "wheel"
    make_package(unpacked, GOOD_OGS)
    make_dist_info(unpacked, "sgl-kernel", "0.3.21", ["sgl_kernel/__init__.py", "triton_kernels/__init__.py"])
    found = loc.candidates(env={}, repo_root=repo, sources=("vendor",))
    assert [(c.source, c.provenance) for c in found] == [("vendor", "sgl-kernel 0.3.21")]


def test_copies_inside_wheels_are_found_without_importing_vllm(tmp_path: Path) -> None:
    site = tmp_path / "site"
    vllm_copy = make_package(site / "vllm" / "third_party", GOOD_OGS)
    (site / "vllm" / "__init__.py").write_text("raise RuntimeError('vllm was imported')\n")
    make_dist_info(site, "vllm", "0.11.0", ["vllm/__init__.py", "vllm/third_party/triton_kernels/__init__.py"])
    sgl_copy = make_package(site, GOOD_OGS)
    make_dist_info(site, "sgl-kernel", "0.3.21", ["triton_kernels/__init__.py", "triton_kernels/matmul_ogs.py"])
    make_dist_info(site, "unrelated", "1.0", ["unrelated/__init__.py"])
    found = loc.candidates(env={}, sources=("installed",), site_dirs=[str(site)])
    assert sorted((c.package_dir, c.provenance) for c in found) == sorted(
        [(vllm_copy, "vllm 0.11.0"), (sgl_copy, "sgl-kernel 0.3.21")])
    located = loc.find_triton_kernels(env={}, sources=("installed",), site_dirs=[str(tmp_path / "none"), str(site)])
    assert located.module is not None and located.source == "installed"
    assert "vllm" not in sys.modules


# --- saying clearly why nothing is usable ------------------------------------------------------------------
def test_copy_that_does_not_import_with_this_triton_is_explained(tmp_path: Path) -> None:
    files = {**GOOD_MATMUL, "__init__.py": "from triton.language import feature_of_triton_3_7\n"}
    pkg = make_package(tmp_path / "new", files)
    with pytest.raises(Unsupported) as info:
        loc.find_triton_kernels(env={loc.ENV_VAR: str(tmp_path / "new")}, sources=("env",))
    message = str(info.value)
    assert f"{pkg} ({loc.ENV_VAR}={tmp_path / 'new'}, env), API 'matmul', does not import" in message
    assert f"with the installed triton {importlib.metadata.version('triton')}: ImportError" in message
    assert "sglang-kernel 0.4.10 needs triton >= 3.8" in message
    assert "triton_kernels" not in sys.modules
    assert str(tmp_path / "new") not in sys.path


def test_another_copy_already_imported_is_not_mixed_in(tmp_path: Path) -> None:
    make_package(tmp_path / "good", GOOD_OGS)
    other = make_package(tmp_path / "other", GOOD_OGS)
    sys.path.insert(0, str(tmp_path / "other"))
    importlib.import_module("triton_kernels")
    with pytest.raises(Unsupported, match=rf"already imported in this process from {other}"):
        loc.find_triton_kernels(env={loc.ENV_VAR: str(tmp_path / "good")}, sources=("env",))


def test_nothing_found_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(Unsupported, match="nothing found: no importable triton_kernels, TRITON_KERNELS_PATH unset"):
        loc.find_triton_kernels(env={}, repo_root=tmp_path, sources=("env", "vendor"))


def test_describe_installed_never_raises(tmp_path: Path) -> None:
    make_package(tmp_path / "bad", {"__init__.py": IMPOSTOR_INIT})
    make_package(tmp_path / "good", GOOD_MATMUL)
    refused = loc.describe_installed(env={loc.ENV_VAR: str(tmp_path / "bad")}, sources=("env",))
    assert refused.startswith(f"not found (refused {tmp_path / 'bad' / 'triton_kernels'}")
    found = loc.describe_installed(env={loc.ENV_VAR: str(tmp_path / "good")}, sources=("env",))
    assert found == f"{loc.ENV_VAR}={tmp_path / 'good'} (API matmul) at {tmp_path / 'good' / 'triton_kernels'} [env]"


def test_unknown_source_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown sources"):
        loc.candidates(sources=("pypi",))


def test_load_copy_switches_between_copies_in_one_process(tmp_path: Path) -> None:
    a = make_package(tmp_path / "sgl-kernel-0.3.21", {**GOOD_OGS, "__init__.py": "COPY = 'A'\n"})
    c = make_package(tmp_path / "sglang-kernel-0.4.6.post1", {**GOOD_MATMUL, "__init__.py": "COPY = 'C'\n"})
    first = loc.load_copy(a)
    assert (first.api_gen, first.provenance, first.module.COPY) == ("matmul_ogs", "sgl-kernel 0.3.21", "A")
    second = loc.load_copy(c)
    assert (second.api_gen, second.provenance, second.module.COPY) == ("matmul", "sglang-kernel 0.4.6.post1", "C")
    assert sys.modules["triton_kernels"].COPY == "C" and "triton_kernels.matmul_ogs" not in sys.modules
    assert str(a.parent) not in sys.path
    assert loc.load_copy(c).module is second.module                      # same copy: not reimported


def test_import_hint_says_the_matmul_copy_c_runs_on_triton_36() -> None:
    assert "sglang-kernel 0.4.6.post1" in loc.IMPORT_HINTS["matmul"]
    assert "imports with triton 3.6" in loc.IMPORT_HINTS["matmul"]
    assert "needs triton >= 3.8" in loc.IMPORT_HINTS["matmul"]
