# Sourced by ci/gpu/field/campaign.sh: suite_def NAME sets SUITE_DIR (where pytest starts: the suite's root, with a
# pytest.ini of its own so that pytest picks no other rootdir), SUITE_PATH (PYTHONPATH: the library's source tree,
# unpacked from its pinned commit into .field/, never installed), SUITE_ARGS (test paths and -k) and SUITE_ENV.
# The libraries' trees: ci/gpu/field/fetch.sh (from `fetch`ed snapshots at the commits below).
suite_def() {
  local F="$REPO/.field"
  SUITE_ENV=(GPU_MEMSAFETY_FIELD=1)
  case $1 in
    calib)     # ours: planted reads and writes of known width (ci/gpu/field/calib/test_widths.py)
      SUITE_DIR="$REPO/ci/gpu/field/calib"; SUITE_PATH="$SUITE_DIR"; SUITE_ARGS=(test_widths.py) ;;
    ao)        # pytorch/ao 36027d82d1ad: the control, pytorch/ao#4634 (unmasked a_s/b_s loads), small M
      SUITE_DIR="$F/ao"; SUITE_PATH="$F/ao"; SUITE_ENV+=(TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1)
      SUITE_ARGS=(test/prototype/blockwise_fp8_training/test_blockwise_kernels.py
                  -k "gemm_1x128 and (2-512-128 or 3-2048-2048 or 13-8704-8576)") ;;
    ao-quant)  # pytorch/ao: the blockwise quantization kernels of the same file
      SUITE_DIR="$F/ao"; SUITE_PATH="$F/ao"; SUITE_ENV+=(TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1)
      SUITE_ARGS=(test/prototype/blockwise_fp8_training/test_blockwise_kernels.py -k "quantize and 128") ;;
    *) return 1 ;;
  esac
}
