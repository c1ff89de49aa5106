#!/usr/bin/env bash
# Rebuild .field/<lib>/ (git-ignored) from the bare snapshots that `fetch` brings (/work/.mirror/<owner>+<name>/repo),
# at the pinned commits, with only what the chosen tests import: the library's Python package (.py files only; no C++,
# CUDA, docs, images) and the test files named below, each tree with an empty pytest.ini so that pytest takes it as
# rootdir. About 11 MiB in all (the carry limit is 64 MiB with the rest of the checkout). Nothing is installed: the
# suites put the tree on PYTHONPATH (ci/gpu/field/suites.sh).
#   bash ci/gpu/field/fetch.sh [ao liger fla mamba]      (MIRROR=/work/.mirror by default)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd); F="$REPO/.field"; M=${MIRROR:-/work/.mirror}
mkdir -p "$F"
# .field/ is in .gitignore; a checkout without it (an older one) gets it excluded (a worktree's .git is a file)
if ! git -C "$REPO" check-ignore -q .field/ 2>/dev/null; then
  X="$(git -C "$REPO" rev-parse --git-common-dir)/info/exclude"; mkdir -p "$(dirname "$X")"; echo '/.field/' >> "$X"
fi

build() {   # build LIB MIRROR_NAME COMMIT PATHS...
  local lib=$1 mirror=$2 commit=$3; shift 3
  local git="$M/$mirror/repo" tmp="$F/.new-$lib"
  [ "$(git -C "$git" rev-parse --short=12 HEAD)" = "$commit" ] || { echo "$mirror: HEAD is not $commit" >&2; exit 1; }
  rm -rf "$tmp"; mkdir -p "$tmp"
  git -C "$git" archive HEAD "$@" | tar -x -C "$tmp"
  find "$tmp" -type f ! -name '*.py' -delete; find "$tmp" -type d -empty -delete
  printf '[pytest]\n' > "$tmp/pytest.ini"
  rm -rf "$F/$lib.old"; [ -d "$F/$lib" ] && mv "$F/$lib" "$F/$lib.old"; mv "$tmp" "$F/$lib"; rm -rf "$F/$lib.old"
  echo "$lib: $(du -sh --apparent-size "$F/$lib" | cut -f1) at $mirror $commit"
}

for lib in ${@:-ao liger fla mamba}; do case $lib in
  ao)     # torchao/__init__ imports quantization, optim, testing; the tests import float8 and prototype/blockwise_*
    build ao pytorch+ao 36027d82d1ad torchao test/__init__.py test/prototype/__init__.py \
      test/prototype/blockwise_fp8_training test/prototype/blockwise_fp8_inference
    ( cd "$F/ao/torchao" && rm -rf csrc experimental quantization/pt2e &&
      for d in prototype/*/; do case $d in prototype/blockwise_fp8_training/|prototype/blockwise_fp8_inference/|prototype/quantization/) ;; *) rm -rf "$d" ;; esac; done )
    # the distributed tests need expecttest and several GPUs: not part of any subset
    rm -f "$F"/ao/test/prototype/blockwise_fp8_training/{test_dtensor,test_fsdp2,test_fsdp2_tp,_distributed_test_utils}.py
    echo "ao (trimmed): $(du -sh --apparent-size "$F/ao" | cut -f1)" ;;
  liger)  # src/ is the package root (PYTHONPATH=src:.); test/utils.py needs transformers and tokenizers
    build liger linkedin+Liger-Kernel ead96b618e5c src/liger_kernel test/__init__.py test/conftest.py test/utils.py \
      test/transformers/test_fused_moe.py test/transformers/test_cross_entropy.py test/transformers/test_layer_norm.py \
      test/transformers/test_group_norm.py test/transformers/test_fused_linear_cross_entropy.py \
      test/transformers/test_embedding.py test/transformers/test_sparsemax.py test/transformers/test_jsd.py \
      test/transformers/test_kl_div.py test/transformers/test_softmax.py test/transformers/test_multi_token_attention.py \
      test/transformers/test_relu_squared.py test/transformers/test_mhc.py \
      test/transformers/test_fused_neighborhood_attention.py test/transformers/test_rms_norm.py \
      test/transformers/test_dyt.py test/transformers/test_poly_norm.py test/transformers/test_fused_add_rms_norm.py \
      test/transformers/test_modulated_rms_norm.py test/transformers/test_geglu.py test/transformers/test_swiglu.py ;;   # liger-cpu
  fla)    # fla/__init__ imports layers and models (transformers): the whole package is needed (5.3 MiB of .py)
    build fla fla-org+flash-linear-attention bc3b101dcb71 fla tests/conftest.py tests/ops ;;   # tests/ops: 0.8 MiB
  mamba)  # mamba_ssm/__init__ imports modules and models; the CUDA extensions are optional imports (try/except)
    build mamba state-spaces+mamba e9594ce1c732 mamba_ssm tests/ops/triton/test_selective_state_update.py \
      tests/ops/triton/test_layernorm_gated.py tests/ops/triton/test_ssd.py tests/ops/triton/test_mamba3_siso.py ;;
  triton_kernels)   # triton_kernels as sglang-kernel 0.4.6.post1 ships it (triton 3.6; `make upstream` unpacks it into
    # .vendor/, by exact version, hash-checked): its tests are not in the wheel, so the suite runs ours
    # (ci/gpu/field/cpu/test_triton_kernels_edges.py), written after triton's python/triton_kernels/tests
    src="$REPO/.vendor/sglang-kernel-0.4.6.post1/triton_kernels"
    [ -f "$src/topk.py" ] || ( cd "$REPO" && "$REPO/.venv/bin/python" -m gpu_memsafety upstream --only tk-C --all --no-tvm-ffi )
    rm -rf "$F/triton_kernels"; mkdir -p "$F/triton_kernels"; cp -r "$src" "$F/triton_kernels/"
    find "$F/triton_kernels" -type f ! -name '*.py' -delete; printf '[pytest]\n' > "$F/triton_kernels/pytest.ini"
    echo "triton_kernels: $(du -sh --apparent-size "$F/triton_kernels" | cut -f1) from sglang-kernel 0.4.6.post1" ;;
  sglang)   # sglang 0.5.19's Triton attention kernels (decode, extend, prefill), from its wheel (pure Python files; pip
    # download by exact version, no dependencies), without the server stack: ci/gpu/field/cpu/sglang_on_cpu.py
    W="${WHEELS:-$HOME/.cache/gpu-memsafety/wheels}"; mkdir -p "$W"
    whl=$(ls "$W"/sglang-0.5.19-*.whl 2>/dev/null | head -1)
    if [ -z "$whl" ]; then "$REPO/.venv/bin/python" -m pip download --no-deps --only-binary=:all: sglang==0.5.19 -d "$W" >&2
      whl=$(ls "$W"/sglang-0.5.19-*.whl | head -1); fi
    rm -rf "$F/sglang"; mkdir -p "$F/sglang"
    ( cd "$F/sglang" && "$REPO/.venv/bin/python" -m zipfile -e "$whl" . > /dev/null &&
      find sglang -mindepth 1 -maxdepth 1 ! -name kernels ! -name srt ! -name version.py -exec rm -rf {} + &&
      find sglang/srt -mindepth 1 -maxdepth 1 ! -name environ.py -exec rm -rf {} + &&
      find sglang/kernels -mindepth 1 -maxdepth 1 ! -name ops -exec rm -rf {} + &&
      find sglang/kernels/ops -mindepth 1 -maxdepth 1 ! -name attention -exec rm -rf {} + &&
      find sglang/kernels/ops/attention -mindepth 1 -maxdepth 1 ! -name decode_attention.py ! -name extend_attention.py \
        ! -name prefill_attention.py ! -name score_mod.py -exec rm -rf {} + && rm -rf sglang-*.dist-info )
    printf '[pytest]\n' > "$F/sglang/pytest.ini"
    echo "sglang: $(du -sh --apparent-size "$F/sglang" | cut -f1) from $(basename "$whl")" ;;
  *) echo "unknown library $lib" >&2; exit 2 ;;
esac; done
echo "total: $(du -sh --apparent-size "$F" | cut -f1)"
