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
    mamba)     # state-spaces/mamba e9594ce1c732 (2.3.2.post1), Triton ops: selective_state_update on dim 2064 tails,
               # with and without state_batch_indices; varlen chunk state
      SUITE_DIR="$F/mamba"; SUITE_PATH="$F/mamba"
      SUITE_ARGS=(tests/ops/triton/test_selective_state_update.py tests/ops/triton/test_ssd.py
                  -k "(2064-16 and itype1 and not heads) or (test_chunk_state_varlen and dtype0)") ;;
    liger)     # linkedin/Liger-Kernel ead96b618e5c (v0.8.2): fused_moe with ragged experts (E=7, T=7, 97x47),
               # cross entropy with a 423-token tail, layer/group norm
      SUITE_DIR="$F/liger"; SUITE_PATH="$F/liger/src:$F/liger"
      SUITE_ENV+=(LIGER_FUSED_MOE_AUTOTUNE=0)    # one config per fused_moe kernel: cold, 22 tests did not fit 110 s without it
      SUITE_ARGS=(test/transformers/test_fused_moe.py test/transformers/test_cross_entropy.py
                  test/transformers/test_group_norm.py test/transformers/test_layer_norm.py
                  -k "(fused_moe and dtype1 and (7-4-64-32-2 or 97-47 or 7-128-64-3)) or single_token or K_equals_E or (test_cross_entropy and test_correctness and 3-423-32000 and mean and not with and not not_last) or test_liger_group_norm or (test_liger_layer_norm and not functional)") ;;
    fla)       # fla-org/flash-linear-attention bc3b101dcb71: the varlen (cu_seqlens) paths of three ops
      SUITE_DIR="$F/fla"; SUITE_PATH="$F/fla"
      SUITE_ARGS=(tests/ops/test_hgrn.py tests/ops/test_solve_tril.py tests/ops/test_simple_gla.py
                  -k "fused_recurrent_varlen or solve_tril_varlen") ;;
    fla-loglinear) # fla bc3b101dcb71, log-linear attention: the varlen tests (cu_seqlens [0, 15]: level_scales read
               # past its end, results/cpu/field-cpu-session17.md) and #1142's partial-last-chunk tests (the control)
      SUITE_DIR="$F/fla"; SUITE_PATH="$F/fla"
      SUITE_ARGS=(tests/ops/test_log_linear_attn.py -k "varlen or partial_last_chunk") ;;
    fla-loglinear-15) # the one test of fla-loglinear that reads past the end (T = 15)
      SUITE_DIR="$F/fla"; SUITE_PATH="$F/fla"
      SUITE_ARGS=("tests/ops/test_log_linear_attn.py::test_chunk_varlen[H4-D64-cu_seqlens[0, 15]-torch.float32]") ;;
    ao-cpu)    # without a GPU (INTERPRET=1): pytorch/ao's real blockwise kernels on CPU tensors in Triton's interpreter,
               # the control pytorch/ao#4634 declared per test, and a full-block clean twin (ci/gpu/field/cpu/)
      SUITE_DIR="$REPO/ci/gpu/field/cpu"; SUITE_PATH="$F/ao"; SUITE_ENV+=(TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1)
      SUITE_ARGS=(test_ao_4634.py) ;;
    calib-cpu) # the calibration on CPU tensors (its conftest sets TRITON_INTERPRET=1 without a GPU)
      SUITE_DIR="$REPO/ci/gpu/field/calib"; SUITE_PATH="$SUITE_DIR"; SUITE_ARGS=(test_widths.py) ;;
    liger-cpu) # linkedin/Liger-Kernel without a GPU: the test files whose kernels Triton's interpreter runs (infer_device()
               # is "cpu" there); the norms, GEGLU and swiglu since detectors/trace_fidelity.py (float arguments,
               # loop variables, libdevice as compiled Triton has them). rope's tests fail on this transformers.
      SUITE_DIR="$F/liger"; SUITE_PATH="$F/liger/src:$F/liger"
      SUITE_ARGS=(test/transformers/test_sparsemax.py test/transformers/test_softmax.py
                  test/transformers/test_multi_token_attention.py test/transformers/test_relu_squared.py
                  test/transformers/test_mhc.py test/transformers/test_fused_neighborhood_attention.py
                  test/transformers/test_rms_norm.py test/transformers/test_layer_norm.py
                  test/transformers/test_group_norm.py test/transformers/test_dyt.py test/transformers/test_poly_norm.py
                  test/transformers/test_fused_add_rms_norm.py test/transformers/test_modulated_rms_norm.py
                  test/transformers/test_geglu.py test/transformers/test_swiglu.py) ;;
    mamba-cpu) # state-spaces/mamba e9594ce1c732 without a GPU: its Triton op tests, whose `device = "cuda"` tensors
               # ci/gpu/field/cpu/cuda_on_cpu.py makes on the CPU
      SUITE_DIR="$F/mamba"; SUITE_PATH="$F/mamba:$REPO/ci/gpu/field/cpu"
      SUITE_ARGS=(-p cuda_on_cpu tests/ops/triton) ;;
    fla-cpu)   # fla-org/flash-linear-attention bc3b101dcb71 without a GPU: every varlen (cu_seqlens) test of tests/ops, its
               # tensors put on the CPU by ci/gpu/field/cpu/fla_on_cpu.py (fla's device detection says cuda otherwise)
      SUITE_DIR="$F/fla"; SUITE_PATH="$F/fla:$REPO/ci/gpu/field/cpu"
      SUITE_ARGS=(-p fla_on_cpu tests/ops -k varlen) ;;
    triton-kernels-cpu) # triton_kernels as sglang-kernel 0.4.6.post1 ships it (ci/gpu/field/fetch.sh triton_kernels): its own
               # tests are not in the wheel; ours, after them, call topk (forward, backward, provided indices, a row
               # count on the device) and compaction at boundary shapes (ci/gpu/field/cpu/test_triton_kernels_edges.py)
      SUITE_DIR="$REPO/ci/gpu/field/cpu"; SUITE_PATH="$F/triton_kernels"
      SUITE_ARGS=(test_triton_kernels_edges.py) ;;
    sglang-cpu) # sglang 0.5.19's Triton attention kernels (decode, extend, prefill) without the server stack
               # (ci/gpu/field/cpu/sglang_on_cpu.py), at boundary shapes, after sglang's test_triton_attention_kernels.py
      SUITE_DIR="$REPO/ci/gpu/field/cpu"; SUITE_PATH="$F/sglang:$REPO/ci/gpu/field/cpu"
      SUITE_ARGS=(-p sglang_on_cpu test_sglang_attention_edges.py) ;;
    mamba3-cpu) # state-spaces/mamba e9594ce1c732, Mamba-3 SISO (its tests are not parametrized: batch 16-128, 2,345
               # tokens, too large for the interpreter): the same calls at small and boundary shapes; the kernels' PTX
               # approximations computed on the CPU (ci/gpu/field/cpu/interpreter_gaps.py)
      SUITE_DIR="$REPO/ci/gpu/field/cpu"; SUITE_PATH="$F/mamba:$REPO/ci/gpu/field/cpu"; SUITE_ENV+=(MAMBA_TREE="$F/mamba")
      SUITE_ARGS=(-p cuda_on_cpu -p interpreter_gaps test_mamba3_edges.py) ;;
    mamba-varlen-cpu) # state-spaces/mamba e9594ce1c732, chunk_state_varlen at segment boundaries its test never draws:
               # the empty first sequence is campaign 2's finding, declared (expected finding)
      SUITE_DIR="$REPO/ci/gpu/field/cpu"; SUITE_PATH="$F/mamba:$REPO/ci/gpu/field/cpu"
      SUITE_ARGS=(-p cuda_on_cpu test_mamba_varlen_edges.py) ;;
    mamba-varlen) # on a GPU: the same test file with CUDA tensors (no cuda_on_cpu), compiled Triton
      SUITE_DIR="$REPO/ci/gpu/field/cpu"; SUITE_PATH="$F/mamba"; SUITE_ENV+=(TRITON_INTERPRET=0)
      SUITE_ARGS=(test_mamba_varlen_edges.py) ;;
    # Campaign 2's cost subsets (issue 50): a slice of each first-campaign CPU suite, run plain and with explore
    liger-c2)  # Liger ead96b618e5c: sparsemax and softmax (parametrized by shapes and dtypes)
      SUITE_DIR="$F/liger"; SUITE_PATH="$F/liger/src:$F/liger"
      SUITE_ARGS=(test/transformers/test_sparsemax.py test/transformers/test_softmax.py -k "float32") ;;
    mamba-c2)  # mamba e9594ce1c732: selective_state_update at dim 2048, dstate 16, fp32, without z (one test: each takes
               # about a minute in the interpreter on a loaded 2-core machine)
      SUITE_DIR="$F/mamba"; SUITE_PATH="$F/mamba:$REPO/ci/gpu/field/cpu"
      SUITE_ARGS=(-p cuda_on_cpu "tests/ops/triton/test_selective_state_update.py::test_selective_state_update[2048-16-False-itype0]") ;;
    fla-c2)    # fla bc3b101dcb71: the varlen tests of ttt and log-linear attention (cu_seqlens lists)
      SUITE_DIR="$F/fla"; SUITE_PATH="$F/fla:$REPO/ci/gpu/field/cpu"
      SUITE_ARGS=(-p fla_on_cpu tests/ops/test_log_linear_attn.py tests/ops/test_ttt.py -k varlen) ;;
    *) return 1 ;;
  esac
}
