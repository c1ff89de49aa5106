"""harness/gpu_memsafety/cli/upstream.py on the CPU with tiny fake wheels: fetch, extraction, idempotence, errors. No test
downloads anything: pip is replaced by a runner that copies a fake wheel into the cache, or fails."""
from __future__ import annotations

import hashlib
import re
import sys
import zipfile
from pathlib import Path
from typing import Sequence

import pytest

from gpu_memsafety.cli import upstream as U
from gpu_memsafety.upstream import catalogue as C
from repo_paths import ROOT


def fake_wheel(directory: Path, art: U.Artifact, files: dict[str, str], name: str = "py3-none-any.whl") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{art.wheel_prefix}{name}"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return path


@pytest.fixture
def pin(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Pins a fake wheel's hash for one test, and commits what it unpacks, as the rows of upstream/pins.py
    (WHEEL_SHA256, UNPACKED_SHA256) would."""
    def add(wheel: Path, *, unpacked: bool = True) -> Path:
        monkeypatch.setitem(U.WHEEL_SHA256, wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest())
        if unpacked:
            monkeypatch.setitem(U.UNPACKED_SHA256, wheel.name, U.wheel_manifest(U.artifact(_key_of(wheel)), wheel))
        return wheel
    return add


def _key_of(wheel: Path) -> str:
    return next(a.key for a in U.ARTIFACTS if wheel.name.startswith(a.wheel_prefix))


def stamp(folder: Path, art: U.Artifact, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stamp as extract writes it, for the first pinned wheel of `art`, whose committed rows are (for this test)
    what the folder holds."""
    name = next(n for n in U.WHEEL_SHA256 if n.startswith(art.wheel_prefix))
    folder.mkdir(parents=True, exist_ok=True)
    monkeypatch.setitem(U.UNPACKED_SHA256, name, U.manifest_of(folder))
    (folder / U.STAMP).write_text(U.stamp_text(name, U.WHEEL_SHA256[name], U.manifest_of(folder)))


def sglang_files() -> dict[str, str]:
    return {C.PRE_DISPATCH_CUH: "// kernel", C.JIT_INCLUDE + "sgl_kernel/tensor.h": "// t",
            C.JIT_INCLUDE + "sgl_kernel/utils.cuh": "// u", "sglang/srt/server.py": "big = 1"}


class FakePip:
    """Stands in for `pip download`: puts a prepared wheel where pip would, or fails like pip."""

    def __init__(self, wheel: Path | None, code: int = 0) -> None:
        self.wheel, self.code, self.calls = wheel, code, []

    def __call__(self, cmd: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(cmd))
        if self.code == 0 and self.wheel is not None:
            dest = Path(cmd[cmd.index("-d") + 1])
            dest.mkdir(parents=True, exist_ok=True)
            (dest / self.wheel.name).write_bytes(self.wheel.read_bytes())
        tail = "ERROR: No matching distribution found" if self.code else "Saved"
        return self.code, tail


def test_fetch_downloads_by_exact_version_and_extracts_only_the_members(tmp_path: Path, pin) -> None:  # type: ignore[no-untyped-def]
    art = U.artifact("sglang-0.5.18")
    pip = FakePip(pin(fake_wheel(tmp_path / "index", art, sglang_files())))
    folder = U.fetch(art, cache=tmp_path / "cache", vendor=tmp_path / "vendor", run=pip, log=lambda _: None)
    cmd = pip.calls[0]
    assert cmd[1:6] == ["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    assert "sglang==0.5.18" in cmd and "--python-version" in cmd and "3.11" in cmd   # cp311 wheels
    assert folder == tmp_path / "vendor" / "sglang-0.5.18"
    assert (folder / C.PRE_DISPATCH_CUH).read_text() == "// kernel"
    assert (folder / C.JIT_INCLUDE / "sgl_kernel" / "tensor.h").is_file()
    assert not (folder / "sglang" / "srt").exists()                       # only what a scenario needs
    stamp = (folder / U.STAMP).read_text().splitlines()
    assert stamp[0].startswith("sglang-0.5.18-") and re.fullmatch(r"[0-9a-f]{64}", stamp[1])


def test_second_run_does_nothing_and_a_half_written_folder_is_redone(tmp_path: Path, pin) -> None:  # type: ignore[no-untyped-def]
    art = U.artifact("tk-A")
    pip = FakePip(pin(fake_wheel(tmp_path / "index", art, {"triton_kernels/__init__.py": "", "sgl_kernel/x.so": "b"})))
    kw = dict(cache=tmp_path / "cache", vendor=tmp_path / "vendor", log=lambda _: None)
    folder = U.fetch(art, run=pip, **kw)
    assert (folder / "triton_kernels" / "__init__.py").is_file() and not (folder / "sgl_kernel").exists()
    U.fetch(art, run=FakePip(None, code=1), **kw)                           # present: pip never called
    (folder / U.STAMP).unlink()                                            # as a run killed mid-extraction leaves it
    (folder / "triton_kernels" / "__init__.py").unlink()
    U.fetch(art, run=FakePip(None, code=1), **kw)                           # wheel cached: re-extracted, no download
    assert (folder / "triton_kernels" / "__init__.py").is_file() and (folder / U.STAMP).is_file()
    assert [p.name for p in (tmp_path / "vendor").iterdir()] == ["sgl-kernel-0.3.21"]   # no staging left


def test_a_version_missing_from_the_index_names_the_version(tmp_path: Path) -> None:
    art = U.artifact("tk-D")
    with pytest.raises(U.UpstreamError) as info:
        U.fetch(art, cache=tmp_path / "c", vendor=tmp_path / "v", run=FakePip(None, code=1), log=lambda _: None)
    text = str(info.value)
    assert "sglang-kernel 0.4.10: download failed (pip exit code 1)" in text
    assert "sglang_kernel-0.4.10-*.whl" in text and "found none" in text and "No matching distribution" in text
    assert not (tmp_path / "v").exists()


def test_a_wheel_without_the_expected_files_is_refused(tmp_path: Path, pin) -> None:  # type: ignore[no-untyped-def]
    art = U.artifact("sglang-0.5.19")
    pip = FakePip(pin(fake_wheel(tmp_path / "index", art, {"sglang/__init__.py": ""})))
    with pytest.raises(U.UpstreamError) as info:
        U.fetch(art, cache=tmp_path / "c", vendor=tmp_path / "v", run=pip, log=lambda _: None)
    assert f"sglang 0.5.19: wheel sglang-0.5.19-py3-none-any.whl lacks {C.PRE_DISPATCH_CUH}" in str(info.value)
    assert U.unpacked(art, tmp_path / "v") is None


def test_a_corrupt_wheel_and_a_member_escaping_its_folder_are_refused(tmp_path: Path, pin) -> None:  # type: ignore[no-untyped-def]
    art = U.artifact("tk-C")
    cache = tmp_path / "c"
    cache.mkdir()
    (cache / f"{art.wheel_prefix}cp39-abi3-linux_x86_64.whl").write_bytes(b"not a zip")
    pin(cache / f"{art.wheel_prefix}cp39-abi3-linux_x86_64.whl", unpacked=False)  # pinned, yet not a zip: unreadable
    with pytest.raises(U.UpstreamError, match="sglang-kernel 0.4.6.post1: .* is not a readable wheel"):
        U.fetch(art, cache=cache, vendor=tmp_path / "v", run=FakePip(None, 1), log=lambda _: None)
    evil = pin(fake_wheel(tmp_path / "i", art, {"triton_kernels/__init__.py": "", "triton_kernels/../../x": ""}),
               unpacked=False)
    with pytest.raises(U.UpstreamError, match="outside its folder"):
        U.extract(art, evil, tmp_path / "v2")
    assert not (tmp_path / "x").exists()


def test_wheel_names_follow_pep_427() -> None:
    assert U.artifact("tk-C").wheel_prefix == "sglang_kernel-0.4.6.post1-"
    assert U.artifact("tk-A").wheel_prefix == "sgl_kernel-0.3.21-"


def test_a_cpu_machine_fetches_no_gpu_only_wheels() -> None:
    cpu = U.plan(everything=False, gpu=False)
    assert cpu and all(not a.gpu_only for a in cpu)
    assert {a.key for a in U.plan(everything=False, gpu=True)} == set(U.BY_KEY)
    assert {a.key for a in U.plan(everything=True, gpu=False)} == set(U.BY_KEY)


def test_if_missing_on_a_cpu_machine_does_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(U, "has_gpu", lambda: False)
    monkeypatch.setattr(U, "fetch", lambda *a, **k: pytest.fail("fetched on a CPU machine"))
    monkeypatch.setenv(U.VENDOR_ENV, str(tmp_path))
    assert U.main(["--if-missing"]) == 0


def test_main_reports_each_failure_and_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    def failing(art: U.Artifact, **_: object) -> Path:
        raise U.UpstreamError(f"{art.label}: download failed")

    monkeypatch.setattr(U, "fetch", failing)
    monkeypatch.setattr(U, "install_tvm_ffi", lambda: None)
    assert U.main(["--only", "sglang-0.5.18", "--only", "tk-A"]) == 1
    err = capsys.readouterr().err
    assert "FAILED: sglang 0.5.18: download failed" in err and "FAILED: sgl-kernel 0.3.21: download failed" in err
    with pytest.raises(SystemExit) as info:                     # an unknown key is a usage error, no traceback
        U.main(["--only", "nope"])
    assert info.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


def test_tvm_ffi_problem_names_what_was_needed_and_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "installed_version", lambda dist: None)
    assert C.tvm_ffi_problem() == (f"needs apache-tvm-ffi==0.1.11 (what sglang 0.5.18/0.5.19 build with), found none "
                                   f"in {sys.prefix}: run `make upstream`")
    monkeypatch.setattr(C, "installed_version", lambda dist: "0.1.9")
    assert "found 0.1.9" in str(C.tvm_ffi_problem())
    monkeypatch.setattr(C, "installed_version", lambda dist: "0.1.11")
    assert C.tvm_ffi_problem() is None


def test_the_tvm_ffi_pin_is_the_one_in_pyproject() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"{U.TVM_FFI_DIST}=={U.TVM_FFI_VERSION}"' in text


def test_wheel_cache_is_outside_the_workspace_and_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(U.WHEELS_ENV, raising=False)
    assert U.wheel_cache() == Path.home() / ".cache" / "gpu-memsafety" / "wheels"
    monkeypatch.setenv(U.WHEELS_ENV, str(tmp_path))
    assert U.wheel_cache() == tmp_path


def test_how_to_get_names_the_make_target() -> None:
    assert "run `make upstream`" in C.how_to_get(U.artifact("tk-C"))
    assert "sglang-kernel 0.4.6.post1" in C.how_to_get(U.artifact("tk-C"))


def test_version_parsing_and_the_triton_gate() -> None:
    assert C.version_tuple("3.6.0") == (3, 6, 0)
    assert C.version_tuple("3.8.0+git1a2b") == (3, 8, 0)
    assert C.version_tuple("0.4.6.post1") == (0, 4, 6)
    d, c = U.artifact("tk-D"), U.artifact("tk-C")
    assert C.triton_problem(d, "3.6.0") == "needs triton >= 3.8, found 3.6.0"
    assert C.triton_problem(d, None) == "needs triton >= 3.8, found none"
    assert C.triton_problem(d, "3.8.0") is None and C.triton_problem(d, "3.10.1") is None
    assert C.triton_problem(c, "3.6.0") is None
    assert set(C.TRITON_KERNELS_COPIES.values()) <= set(U.BY_KEY)


def test_if_missing_on_a_gpu_machine_fetches_only_what_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.setattr(U, "has_gpu", lambda: True)
    monkeypatch.setenv(U.VENDOR_ENV, str(tmp_path))
    for art in U.ARTIFACTS:
        if art.key != "tk-C":
            stamp(tmp_path / art.folder, art, monkeypatch)
    fetched: list[str] = []
    monkeypatch.setattr(U, "fetch", lambda art, **_: fetched.append(art.key))
    monkeypatch.setattr(U, "install_tvm_ffi", lambda: fetched.append("tvm-ffi"))
    monkeypatch.setattr(U, "tvm_ffi_problem", lambda: None)
    assert U.main(["--if-missing"]) == 0
    assert fetched == ["tk-C", "tvm-ffi"]
    stamp(tmp_path / "sglang-kernel-0.4.6.post1", U.artifact("tk-C"), monkeypatch)
    fetched.clear()
    assert U.main(["--if-missing"]) == 0 and fetched == []          # second run: nothing to do


# ------------------------------------------------------------------------------------------- pinned hashes

def test_a_cached_wheel_with_other_contents_is_refused_naming_the_file_and_both_hashes(tmp_path: Path) -> None:
    """The cache is outside the repository: a well-formed wheel under the published name, with other contents, is
    never unpacked nor stamped as the version."""
    art = U.artifact("sglang-0.5.18")
    name = "cp311-cp311-manylinux_2_34_x86_64.whl"
    forged = fake_wheel(tmp_path / "cache", art, sglang_files(), name=name)
    found = hashlib.sha256(forged.read_bytes()).hexdigest()
    with pytest.raises(U.UpstreamError) as info:
        U.fetch(art, cache=tmp_path / "cache", vendor=tmp_path / "vendor", run=FakePip(None, 1), log=lambda _: None)
    text = str(info.value)
    assert str(forged) in text and f"expected {U.WHEEL_SHA256[forged.name]}" in text and f"found {found}" in text
    assert not (tmp_path / "vendor").exists() and U.unpacked(art, tmp_path / "vendor") is None


def test_a_wheel_without_a_pin_is_refused(tmp_path: Path) -> None:
    art = U.artifact("tk-A")
    pip = FakePip(fake_wheel(tmp_path / "index", art, {"triton_kernels/__init__.py": ""}))
    with pytest.raises(U.UpstreamError, match=r"sgl_kernel-0.3.21-py3-none-any.whl has no pinned SHA-256 \(found [0-9a-f]{64}\)"):
        U.fetch(art, cache=tmp_path / "c", vendor=tmp_path / "v", run=pip, log=lambda _: None)
    assert not (tmp_path / "v").exists()


def test_a_folder_stamped_from_an_unpinned_wheel_is_not_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    art = U.artifact("tk-C")
    folder = tmp_path / art.folder
    stamp(folder, art, monkeypatch)
    assert U.unpacked(art, tmp_path) == folder
    name = (folder / U.STAMP).read_text().splitlines()[0]
    (folder / U.STAMP).write_text(f"{name}\n{'0' * 64}\n1 files\n")          # unpacked before the pins, or forged
    assert U.unpacked(art, tmp_path) is None
    (folder / U.STAMP).write_text("sglang-0.5.18-cp311-cp311-manylinux_2_34_x86_64.whl\n"
                                  f"{U.WHEEL_SHA256['sglang-0.5.18-cp311-cp311-manylinux_2_34_x86_64.whl']}\n")
    assert U.unpacked(art, tmp_path) is None                                     # another artifact's wheel


def test_every_artifact_has_pinned_linux_wheels_and_pins_are_sha256() -> None:
    for name, digest in U.WHEEL_SHA256.items():
        assert re.fullmatch(r"[0-9a-f]{64}", digest), name
        assert name.endswith(".whl"), name
    for art in U.ARTIFACTS:
        mine = [n for n in U.WHEEL_SHA256 if n.startswith(art.wheel_prefix)]
        # a pure-Python wheel serves every machine; a platform wheel needs at least the x86_64 one (the GPU runners');
        # a machine whose wheel has no pin is refused naming the file (tests above)
        assert any(n.endswith("-none-any.whl") or "x86_64" in n for n in mine), art.key


def test_tvm_ffi_is_installed_only_with_its_pinned_hashes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(C, "tvm_ffi_problem", lambda: "missing")   # where install_tvm_ffi looks it up
    seen: dict[str, object] = {}

    def pip(cmd: Sequence[str]) -> tuple[int, str]:
        seen["cmd"] = list(cmd)
        seen["requirements"] = Path(cmd[cmd.index("-r") + 1]).read_text()
        return 0, "Successfully installed"

    U.install_tvm_ffi(run=pip, cache=tmp_path)
    cmd = seen["cmd"]
    assert isinstance(cmd, list) and "--require-hashes" in cmd and "--no-deps" in cmd
    requirement = str(seen["requirements"])
    assert requirement.startswith("apache-tvm-ffi==0.1.11 --hash=sha256:")
    cp311 = "apache_tvm_ffi-0.1.11-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
    assert f"--hash=sha256:{U.WHEEL_SHA256[cp311]}" in requirement


def test_a_tampered_unpacked_file_under_a_forged_stamp_is_refused_naming_it(tmp_path: Path, pin) -> None:  # type: ignore[no-untyped-def]
    """A shared vendor folder: the wheel is pinned, yet a file unpacked from it is edited, one is added, or the
    stamp is rewritten by hand; every use checks the tree against the manifest written at unpack time."""
    art = U.artifact("tk-A")
    pip = FakePip(pin(fake_wheel(tmp_path / "index", art, {"triton_kernels/__init__.py": "x = 1",
                                                          "triton_kernels/matmul.py": "ok = True"})))
    kw = dict(cache=tmp_path / "cache", vendor=tmp_path / "vendor", log=lambda _: None)
    folder = U.fetch(art, run=pip, **kw)
    assert U.unpacked(art, tmp_path / "vendor") == folder
    good_stamp = (folder / U.STAMP).read_text()
    assert f"{hashlib.sha256(b'ok = True').hexdigest()}  triton_kernels/matmul.py" in good_stamp.splitlines()
    (folder / "triton_kernels" / "matmul.py").write_text("ok = False")                    # tampered
    with pytest.raises(U.TamperedError) as info:
        U.unpacked(art, tmp_path / "vendor")
    text = str(info.value)
    assert str(folder / "triton_kernels" / "matmul.py") in text and "differs from what was unpacked" in text
    assert f"--only {art.key}" in text                                                      # how to refetch
    # the forged stamp of the issue: the old three-line stamp over the tampered tree is not "present"
    (folder / U.STAMP).write_text("\n".join(good_stamp.splitlines()[:2]) + "\n2 files\n")
    assert U.unpacked(art, tmp_path / "vendor") is None
    (folder / U.STAMP).write_text("\n".join(good_stamp.splitlines()[:2]) + "\n0 files\n")   # a manifest of nothing
    with pytest.raises(U.TamperedError, match="matmul.py differs"):
        U.unpacked(art, tmp_path / "vendor")
    # issue 53: the stamp rewritten with the project's own hash functions over the tampered tree
    (folder / U.STAMP).write_text(U.stamp_text(good_stamp.splitlines()[0], good_stamp.splitlines()[1],
                                               U.manifest_of(folder)))
    with pytest.raises(U.TamperedError, match="matmul.py differs"):
        U.unpacked(art, tmp_path / "vendor")
    (folder / U.STAMP).write_text(good_stamp)
    (folder / "triton_kernels" / "matmul.py").write_text("ok = True")
    (folder / "triton_kernels" / "evil.py").write_text("import os")                       # added
    with pytest.raises(U.TamperedError, match=r"evil.py is not in the manifest \(added after unpacking\)"):
        U.unpacked(art, tmp_path / "vendor")
    (folder / "triton_kernels" / "evil.py").unlink()
    (folder / "triton_kernels" / "matmul.py").unlink()
    (folder / "triton_kernels" / "matmul.py").symlink_to(tmp_path / "index")                # a link in its place
    with pytest.raises(U.TamperedError, match="not a regular file"):
        U.unpacked(art, tmp_path / "vendor")
    (folder / "triton_kernels" / "matmul.py").unlink()
    with pytest.raises(U.TamperedError, match="matmul.py is missing"):
        U.unpacked(art, tmp_path / "vendor")
    assert U.fetch(art, run=FakePip(None, code=1), **kw) == folder                         # make upstream redoes it
    assert U.unpacked(art, tmp_path / "vendor") == folder
    assert (folder / "triton_kernels" / "matmul.py").read_text() == "ok = True"


def test_a_tampered_tree_stops_the_kernel_that_would_use_it(tmp_path: Path, pin, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Re-verified before use: the adapter's own lookup (U.unpacked) raises, it never loads the edited file."""
    art = U.artifact("sglang-0.5.18")
    pip = FakePip(pin(fake_wheel(tmp_path / "index", art, sglang_files())))
    folder = U.fetch(art, cache=tmp_path / "c", vendor=tmp_path / "v", run=pip, log=lambda _: None)
    monkeypatch.setenv(U.VENDOR_ENV, str(tmp_path / "v"))
    (folder / C.PRE_DISPATCH_CUH).write_text("// kernel with the bounds check removed")
    with pytest.raises(U.TamperedError, match="mega_moe_pre_dispatch.cuh differs"):
        U.unpacked(art)
    assert "TAMPERED" in _main_out(["--list"], monkeypatch, tmp_path)[1]


def _main_out(argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
              capsys: pytest.CaptureFixture[str] | None = None) -> tuple[int, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = U.main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue() + err.getvalue()


def test_a_file_as_the_wheel_folder_and_an_unknown_key_end_in_messages(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(U, "has_gpu", lambda: False)
    monkeypatch.setenv(U.VENDOR_ENV, str(tmp_path / "vendor"))
    code, text = _main_out(["--only", "no-such-thing", "--no-tvm-ffi"], monkeypatch, tmp_path)
    assert code == 2 and "invalid choice: 'no-such-thing'" in text and "tk-C" in text and "Traceback" not in text
    (tmp_path / "wheels").write_text("a file, not a folder")
    monkeypatch.setenv(U.WHEELS_ENV, str(tmp_path / "wheels"))
    code, text = _main_out(["--only", "tk-C", "--no-tvm-ffi"], monkeypatch, tmp_path)
    assert code == 2 and f"{tmp_path / 'wheels'} is not a folder; set {U.WHEELS_ENV} to a folder" in text
    monkeypatch.setenv(U.WHEELS_ENV, str(tmp_path / "wheels" / "sub"))
    code, text = _main_out(["--only", "tk-C", "--no-tvm-ffi"], monkeypatch, tmp_path)
    assert code == 2 and "is not a folder" in text
    monkeypatch.setenv(U.WHEELS_ENV, str(tmp_path / "wheels2"))
    monkeypatch.setenv(U.VENDOR_ENV, str(tmp_path / "wheels"))                          # the file as vendor folder
    code, text = _main_out(["--list"], monkeypatch, tmp_path)
    assert code == 2 and "the vendor folder" in text and U.VENDOR_ENV in text and "Traceback" not in text


def _with_record(directory: Path, art: U.Artifact, files: dict[str, str], name: str) -> Path:
    """A fake wheel with a PEP 427 RECORD of its files."""
    import base64
    rows = [f"{m},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).decode().rstrip('=')},"
            f"{len(t.encode())}" for m, t in files.items()]
    record = f"{art.dist.replace('-', '_')}-{art.version}.dist-info/RECORD"
    return fake_wheel(directory, art, {**files, record: "\n".join(rows + [f"{record},,"]) + "\n"}, name=name)


def test_a_pinned_wheel_without_committed_rows_vouches_through_its_own_record(tmp_path: Path, pin,  # type: ignore[no-untyped-def]
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 53: the hashes an unpacked tree is checked against never come from the tree: here the pinned wheel's
    RECORD (another platform's wheel, no rows committed for it), read from the cached wheel after its pin."""
    art = U.artifact("tk-A")
    wheel = pin(_with_record(tmp_path / "index", art, {"triton_kernels/__init__.py": "x = 1",
                                                       "triton_kernels/matmul.py": "ok = True"},
                             "cp310-abi3-manylinux2014_aarch64.whl"), unpacked=False)
    monkeypatch.setenv("GPU_MEMSAFETY_WHEELS", str(tmp_path / "cache"))
    assert U.wheel_cache() == tmp_path / "cache"
    folder = U.fetch(art, cache=tmp_path / "cache", vendor=tmp_path / "v", run=FakePip(wheel), log=lambda _: None)
    assert U.unpacked(art, tmp_path / "v") == folder
    assert U.record_manifest(art, tmp_path / "cache" / wheel.name) == U.wheel_manifest(art, wheel)
    (folder / "triton_kernels" / "matmul.py").write_text("ok = False")
    (folder / U.STAMP).write_text(U.stamp_text(wheel.name, U.WHEEL_SHA256[wheel.name], U.manifest_of(folder)))
    with pytest.raises(U.TamperedError, match="matmul.py differs"):
        U.unpacked(art, tmp_path / "v")
    (tmp_path / "cache" / wheel.name).unlink()          # nothing left to vouch for the tree: not trusted
    with pytest.raises(U.TamperedError, match="cannot be checked against anything but themselves"):
        U.unpacked(art, tmp_path / "v")


def test_the_committed_rows_are_the_pinned_wheels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every committed row names a pinned wheel; where that wheel is in this machine's cache, the rows are what it
    unpacks (its bytes and its RECORD)."""
    assert set(U.UNPACKED_SHA256) <= set(U.WHEEL_SHA256)
    for art in U.ARTIFACTS:
        assert any(n.startswith(art.wheel_prefix) for n in U.UNPACKED_SHA256), art.key
    for name, rows in U.UNPACKED_SHA256.items():
        assert rows and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in rows.values()), name
        wheel = U.wheel_cache() / name
        if wheel.is_file() and wheel.stat().st_size < (64 << 20):   # the big ones (vLLM: 400 MB) would take long
            art = next(a for a in U.ARTIFACTS if name.startswith(a.wheel_prefix))
            assert U.wheel_manifest(art, wheel) == rows == U.record_manifest(art, wheel), name
