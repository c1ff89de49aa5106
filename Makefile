# Two commands set up a fresh machine and run: `make test` (the harness's own tests, CPU) and
# `make sanitize` (every scenario, every detector that applies to it: mode complete; workers per GPU chosen from its
# memory, the cores and the matrix). `make sanitize-quick` is the partial gate for pull requests (mode both:
# memcheck and the guard markers only).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REPORTS ?= reports
MODE ?= complete
# SHARD=K/N runs shard K of N of the matrix (split evenly by expected cost); merge the N report.json files
# with `python -m gpu_memsafety merge`. The shards of one run share RUN_GROUP (under CI the run's id by default).
SHARD ?=
RUN_GROUP ?=
PYTEST_ARGS ?=
BENCH_ARGS ?=
# Directories of your own scenarios (space-separated), besides scenarios/: see docs/writing-a-scenario.md.
SCENARIO_PATH ?=

# Every value reaches the shell single-quoted, taken as written (no make functions run from it either):
# `make sanitize 'REPORTS=x; cmd'` names a directory "x; cmd", it never runs cmd. The argument lists
# (PYTEST_ARGS, BENCH_ARGS, UPSTREAM_ARGS) go through the environment to harness/gpu_memsafety/cli/makeargs.py, which splits
# them as a shell splits words (quotes work) and runs nothing.
q = '$(subst ','\'',$(1))'
# Nor does make expand them to pass them on through the environment (it would run a $(shell ...) in them).
unexport PYTHON VENV REPORTS MODE SHARD RUN_GROUP PYTEST_ARGS BENCH_ARGS UPSTREAM_ARGS SCENARIO_PATH
SCENARIO_ARGS = $(foreach p,$(value SCENARIO_PATH),--gpu-memsafety-scenario-path $(call q,$(abspath $(p))))
# `gpu-memsafety bench` is not pytest: its own option keeps the short name.
CLI_SCENARIO_ARGS = $(foreach p,$(value SCENARIO_PATH),--scenario-path $(call q,$(abspath $(p))))
QPY = $(call q,$(value PY))
ARGS_FROM = $(QPY) -m gpu_memsafety.cli.makeargs GPU_MEMSAFETY_MAKE_ARGS -- $(QPY)

.PHONY: test test-fast stacks sanitize sanitize-quick smoke bench env upstream triton-kernels clean

$(VENV)/.bootstrap-test: pyproject.toml tools/bootstrap.py
	$(call q,$(value PYTHON)) tools/bootstrap.py --venv $(call q,$(value VENV)) --extras test

# The scenario runs' set: xdist (-n auto), and cuda-bindings where there is an NVIDIA driver (none on a CPU machine).
$(VENV)/.bootstrap-gpu: pyproject.toml tools/bootstrap.py
	$(call q,$(value PYTHON)) tools/bootstrap.py --venv $(call q,$(value VENV)) --extras gpu,xdist --stamp .bootstrap-gpu

test sanitize smoke: export GPU_MEMSAFETY_MAKE_ARGS = $(value PYTEST_ARGS)
test: $(VENV)/.bootstrap-test
	$(ARGS_FROM) -m pytest -n 2

# The fast set, for a developer's edit-test loop: every test but the end-to-end ones (marked e2e: they start
# pytest, a worker or another child process). `make test` and CI run everything.
test-fast: export GPU_MEMSAFETY_MAKE_ARGS = $(value PYTEST_ARGS)
test-fast: $(VENV)/.bootstrap-test
	$(ARGS_FROM) -m pytest -n 2 -m 'not e2e'

# A wheel built from this checkout, installed next to the oldest and the newest torch/triton stacks the package
# index offers (ci/stacks/test_stacks.py): no resolution error, nothing there changed, the planted bugs found.
# The first run installs each stack (several GB; kept in ~/.cache/pip and ~/.cache/gpu-memsafety/stacks). CI runs it.
stacks: export GPU_MEMSAFETY_MAKE_ARGS = $(value PYTEST_ARGS)
stacks: $(VENV)/.bootstrap-test
	$(ARGS_FROM) -m pytest ci/stacks -p no:cacheprovider -rfExXs --durations=5

# On a GPU machine the first run fetches the upstream code it lacks (`make upstream`); a failed fetch is printed
# and the cases that need it say so (unsupported, with how to get it). A CPU machine fetches nothing here.
sanitize: $(VENV)/.bootstrap-gpu
	-$(QPY) -m gpu_memsafety upstream --if-missing
	$(ARGS_FROM) -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadgroup --gpu-memsafety-mode $(call q,$(value MODE)) \
		--gpu-memsafety-report-dir $(call q,$(value REPORTS)) $(if $(value SHARD),--gpu-memsafety-shard $(call q,$(value SHARD))) \
		$(if $(value RUN_GROUP),--gpu-memsafety-run-group $(call q,$(value RUN_GROUP))) $(SCENARIO_ARGS)

# Memcheck and the guard markers only (no poison, uninit, racecheck, synccheck): quicker, and partial, as its
# report says.
sanitize-quick:
	$(MAKE) sanitize MODE=both

smoke: $(VENV)/.bootstrap-gpu
	$(ARGS_FROM) -m pytest scenarios -p no:cacheprovider -rfEs -m smoke --gpu-memsafety-mode $(call q,$(value MODE)) \
		--gpu-memsafety-report-dir $(call q,$(value REPORTS)) $(SCENARIO_ARGS)

bench: export GPU_MEMSAFETY_MAKE_ARGS = $(value BENCH_ARGS)
bench: $(VENV)/.bootstrap-gpu
	$(ARGS_FROM) -m gpu_memsafety $(CLI_SCENARIO_ARGS) bench --out $(call q,$(value REPORTS)/bench)

env: $(VENV)/.bootstrap-gpu
	$(QPY) -m gpu_memsafety env

# The published upstream code the scenarios run, by exact version (harness/gpu_memsafety/cli/upstream.py): sglang's pre-dispatch
# .cuh and JIT headers, the triton_kernels/ folders of sgl-kernel 0.3.21, sglang-kernel 0.4.6.post1 and 0.4.10,
# unpacked into .vendor/; wheels cached in $$GPU_MEMSAFETY_WHEELS (default ~/.cache/gpu-memsafety/wheels);
# apache-tvm-ffi installed into the venv. Idempotent. Without a GPU the GPU-only wheels are skipped
# (UPSTREAM_ARGS=--all fetches them anyway).
UPSTREAM_ARGS ?=
upstream: export GPU_MEMSAFETY_MAKE_ARGS = $(value UPSTREAM_ARGS)
upstream: $(VENV)/.bootstrap-gpu
	$(ARGS_FROM) -m gpu_memsafety upstream

# Only triton_kernels copy A (sgl-kernel 0.3.21, matmul_ogs API, triton 3.6), as before `make upstream`.
triton-kernels: $(VENV)/.bootstrap-gpu
	$(QPY) -m gpu_memsafety upstream --only tk-A --no-tvm-ffi

clean:
	rm -rf -- $(call q,$(value REPORTS)) .cache/runs
