"""The SHA-256 of every wheel `make upstream` may use, pinned in the repository (cli/upstream.py checks them).

Why this exists: the wheel cache ($GPU_MEMSAFETY_WHEELS) and the package index are outside the repository, so a
wheel found there is not trusted by its name: a well-formed wheel with other contents would otherwise be
unpacked into .vendor/ and stamped as the version the scenarios claim to run. Every wheel is hashed before
anything is extracted from it, and a wheel whose file name is not below, or whose hash differs, is refused
naming the file, the pinned hash and the one found.

One row per wheel file: its exact file name (as PyPI serves it) and the sha256 PyPI publishes for it (the
"Hashes" of the file on the release's page, or `python -m pip hash FILE` of a wheel you checked). Adding an
artifact to cli/upstream.py means adding the rows of its wheels here: the Linux wheels (x86_64 and aarch64) of
every Python this project supports, since `pip download` picks the one for the machine that runs it.
Taken from PyPI's JSON API (https://pypi.org/pypi/<dist>/<version>/json, digests.sha256) on 2026-12-01.
"""
from __future__ import annotations

from pathlib import Path

from gpu_memsafety.util import jsonio

WHEEL_SHA256: dict[str, str] = {
    # sglang 0.5.18
    "sglang-0.5.18-cp310-cp310-manylinux_2_34_aarch64.whl":
        "f8384cec302537fbe31aa271e02ca6a318fa64547a7e10a0cd4c03f7e60f2dce",
    "sglang-0.5.18-cp310-cp310-manylinux_2_34_x86_64.whl":
        "8a7e596914bab0fec0ebff16c430dfd04077fb673c81008c8eb6aa584e3da4e2",
    "sglang-0.5.18-cp311-cp311-manylinux_2_34_aarch64.whl":
        "fae5e92a9f3b880974ac731eb570e3d164886291807473bd95d2458f5b28957e",
    "sglang-0.5.18-cp311-cp311-manylinux_2_34_x86_64.whl":
        "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf",
    "sglang-0.5.18-cp312-cp312-manylinux_2_34_aarch64.whl":
        "279621e464e56c597150e542321350ea56e000e192d52fcffbd4cbe9ea80ca7f",
    "sglang-0.5.18-cp312-cp312-manylinux_2_34_x86_64.whl":
        "fba7bb31a5de4c014945cbc50e9357c9253cc965a423736c324b2aaccd2270dc",
    "sglang-0.5.18-cp313-cp313-manylinux_2_34_aarch64.whl":
        "acbb5bc107e42f6b9f364be12a248be4ec993085a8c6963df451def2437c75f3",
    "sglang-0.5.18-cp313-cp313-manylinux_2_34_x86_64.whl":
        "8a4fae5995751f32278f9466da6cb77d6dace1ae92b89a30ff8fdcf0c621c324",
    # sglang 0.5.19
    "sglang-0.5.19-cp310-cp310-manylinux_2_34_aarch64.whl":
        "4e0fd565f2217e0ecd9aebe31135c0663f1060d25a314076f226d88fa0ecaf8e",
    "sglang-0.5.19-cp310-cp310-manylinux_2_34_x86_64.whl":
        "c61a5e72df7c7e457325ddadea11e2cae93dff5cfe00eb39d689c8d3c7e647ad",
    "sglang-0.5.19-cp311-cp311-manylinux_2_34_aarch64.whl":
        "d93f4f6e3185cfe0cec423a58d0fe542831fbb8ea00f64d24b5b9020eb5ad142",
    "sglang-0.5.19-cp311-cp311-manylinux_2_34_x86_64.whl":
        "425e87377e725d03db8262382008f3fd9561a6cf5d82f485f8b9929f02ffe12b",
    "sglang-0.5.19-cp312-cp312-manylinux_2_34_aarch64.whl":
        "f32da6712a897ce94594ee1473bb14cc9b8cdf7702483e860aef8a3b74c488f2",
    "sglang-0.5.19-cp312-cp312-manylinux_2_34_x86_64.whl":
        "fdc65d1235f6861ad3a1116c36c2270e46a95f030200091f8de595c6c3426cd2",
    "sglang-0.5.19-cp313-cp313-manylinux_2_34_aarch64.whl":
        "38035efcd17d235c48a86f32c4052994ce55a465a2075bd12cbcbc76650138dd",
    "sglang-0.5.19-cp313-cp313-manylinux_2_34_x86_64.whl":
        "85391740b6f3c5c9b46d2bc79bd92e93dfeadc48f0bf8a9438344ac3c3256157",
    # sgl-kernel 0.3.21
    "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_aarch64.whl":
        "bafdcc26e9ce1e9102b99e4186d652fefbafe5c22ea2cbb5ffe07b331e83be1f",
    "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl":
        "57dfb3a2a3cd759f499c32e2bad5f6489b7c58f7f9a84ee00c53ec92d303aaab",
    # sglang-kernel 0.4.6.post1
    "sglang_kernel-0.4.6.post1-cp310-abi3-manylinux2014_aarch64.whl":
        "7eccd61408b44b55ab35cdbcf8a05243ce2a9a5e781fabb00da375af7d7130a1",
    "sglang_kernel-0.4.6.post1-cp310-abi3-manylinux2014_x86_64.whl":
        "5fee1007113c988bf6d448eca4706f7959631d449a429eb790a70bf89ab0ef04",
    # sglang-kernel 0.4.10
    "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_aarch64.whl":
        "2c48d45eb3d6399000fb1d71e792128911f0d906f0dc61724348e96c2aac0429",
    "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl":
        "043cbe4a10e7887ea1b25599b729ff1ce115a0d5217b2c177aff9f9ae5327724",
    # apache-tvm-ffi 0.1.11 (installed into the environment by `make upstream`, pinned in pyproject.toml)
    "apache_tvm_ffi-0.1.11-cp310-cp310-manylinux2014_aarch64.manylinux_2_17_aarch64.whl":
        "e7527775369a32964e083fed04a3a1ce4134e3e8719a64660ad976be2d0ee58e",
    "apache_tvm_ffi-0.1.11-cp310-cp310-manylinux2014_x86_64.manylinux_2_17_x86_64.whl":
        "c5b2b6ae779008ab1586866dc04ab8d5798e5cf6c240df675b78501c6c6f8c95",
    "apache_tvm_ffi-0.1.11-cp310-cp310-manylinux_2_24_aarch64.manylinux_2_28_aarch64.whl":
        "66d9a23689070d8c3d3c3a47b3f2624f7b160ab155b6b8283d9b16b1a94e50d1",
    "apache_tvm_ffi-0.1.11-cp310-cp310-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl":
        "a565f6bf25adf588576578d7e2a272b09afef4084c4b668807045bd9e1ee89a9",
    "apache_tvm_ffi-0.1.11-cp311-cp311-manylinux2014_aarch64.manylinux_2_17_aarch64.whl":
        "2f0d4b165f371d2dee6013e47353d178b01742171fd1092c654cbbc0fa5c6d60",
    "apache_tvm_ffi-0.1.11-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl":
        "2cf501753d7693daa73711a27f0f9d9f0f76e9e7d98f2fc2403f423ee7bbfd9b",
    "apache_tvm_ffi-0.1.11-cp311-cp311-manylinux_2_24_aarch64.manylinux_2_28_aarch64.whl":
        "a051c84985be3f9d8a20a16ec4bdba73a7ae01d3fb2f18a2c72bbd7a28aaa155",
    "apache_tvm_ffi-0.1.11-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl":
        "87f84e7c2393fadac340fd179a631a697effe54d7317b2543e0930452a0a673d",
    "apache_tvm_ffi-0.1.11-cp312-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl":
        "da2c8d07fdc737d1ba75f4de25c29f156905b9dc980f1da90c395b4db525f522",
    "apache_tvm_ffi-0.1.11-cp312-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl":
        "78aa1857b04a2ea718317041ab3f01288b3d496e6036eb1b99ebdc9da0fdaef5",
    "apache_tvm_ffi-0.1.11-cp312-abi3-manylinux_2_24_aarch64.manylinux_2_28_aarch64.whl":
        "a8b845c8dff498fb981c1dda36c954549204191b485a385845e604966594d0b2",
    "apache_tvm_ffi-0.1.11-cp312-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl":
        "2843f084cdc94dedacd8b257a395a2b71b8a3dc7fc99711b148bf1d161983128",
    "apache_tvm_ffi-0.1.11-cp314-cp314t-manylinux2014_aarch64.manylinux_2_17_aarch64.whl":
        "a05b36530d7cd5bb93b1a21a3b81ff060968c20456c4870b1a80d65966d5114f",
    "apache_tvm_ffi-0.1.11-cp314-cp314t-manylinux2014_x86_64.manylinux_2_17_x86_64.whl":
        "9b158f93bdfc497ead9fce5ffdd4d132708de60970ffc97d890dd62fa39d9fb4",
    "apache_tvm_ffi-0.1.11-cp314-cp314t-manylinux_2_24_aarch64.manylinux_2_28_aarch64.whl":
        "0f77406e2773ad18109369417b5ccf6aee3c813867dbd5d2d97170bfa7b491f1",
    "apache_tvm_ffi-0.1.11-cp314-cp314t-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl":
        "78f0c9dc69727665de58faebacf6a3f4a1d75a355591e963e1bc691fc9bf5cd5",
    # vllm 0.27.1 / 0.33.0 (x86_64 only: PyPI's file as `pip download` fetched it, hashed here on 2026-12-01),
    # flashinfer-python 0.7.1 / 0.7.2 (pure Python: one wheel for every machine)
    "vllm-0.27.1-cp38-abi3-manylinux_2_28_x86_64.whl":
        "98e9fc2a1ed8549a733c9d1b242e2002b82367da9e29e37801761438cb3a2670",
    "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl":
        "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa",
    "flashinfer_python-0.7.1-py3-none-any.whl":
        "69302ed6e91314a85a4392324becc194594a782ba181646d25d5c305e1b7e8c4",
    "flashinfer_python-0.7.2-py3-none-any.whl":
        "770550a0aa92b2f10e6c9a1f048dd43713f0f3bb6a12710186fcf8e4e9c99bd8",
}


# What `make upstream` unpacks from each pinned wheel, file by file: {wheel file name: {member: sha256}}, hashed from
# the pinned wheel's own bytes (cli/upstream.wheel_manifest; each row equal to the wheel's RECORD) on 2026-12-07, kept
# in upstream_unpacked.json beside this file. Every use of an unpacked folder is checked against these, never against
# hashes kept in the folder (a tampered file under a stamp rewritten with the folder's own hashes would pass). A
# pinned wheel without rows there (another platform's) is checked against its own RECORD, from the cached wheel.
UNPACKED_SHA256: dict[str, dict[str, str]] = jsonio.loads(
    (Path(__file__).resolve().parent / "upstream_unpacked.json").read_text(encoding="utf-8"))
