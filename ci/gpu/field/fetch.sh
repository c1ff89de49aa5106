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
grep -qx '/.field/' "$REPO/.git/info/exclude" 2>/dev/null || echo '/.field/' >> "$REPO/.git/info/exclude"

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
      test/transformers/test_fused_neighborhood_attention.py ;;
  fla)    # fla/__init__ imports layers and models (transformers): the whole package is needed (5.3 MiB of .py)
    build fla fla-org+flash-linear-attention bc3b101dcb71 fla tests/conftest.py tests/ops ;;   # tests/ops: 0.8 MiB
  mamba)  # mamba_ssm/__init__ imports modules and models; the CUDA extensions are optional imports (try/except)
    build mamba state-spaces+mamba e9594ce1c732 mamba_ssm tests/ops/triton/test_selective_state_update.py \
      tests/ops/triton/test_layernorm_gated.py tests/ops/triton/test_ssd.py tests/ops/triton/test_mamba3_siso.py ;;
  *) echo "unknown library $lib" >&2; exit 2 ;;
esac; done
echo "total: $(du -sh --apparent-size "$F" | cut -f1)"
