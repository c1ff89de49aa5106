# Two commands set up a fresh machine and run: `make test` (the harness's own tests, CPU) and
# `make sanitize` (every scenario under guard markers and memcheck, one xdist worker per GPU).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REPORTS ?= reports
MODE ?= both
# SHARD=K/N runs shard K of N of the matrix (split evenly by expected cost); merge the N report.json files
# with `python -m gpu_memsafety merge`.
SHARD ?=
PYTEST_ARGS ?=
BENCH_ARGS ?=
# Directories of your own scenarios (space-separated), besides scenarios/: see docs/writing-a-scenario.md.
SCENARIO_PATH ?=
SCENARIO_ARGS := $(foreach p,$(SCENARIO_PATH),--scenario-path $(abspath $(p)))

.PHONY: test sanitize smoke bench env upstream triton-kernels clean

$(VENV)/.bootstrap-test: pyproject.toml tools/bootstrap.py
	$(PYTHON) tools/bootstrap.py --venv $(VENV) --extras test

$(VENV)/.bootstrap-gpu: pyproject.toml tools/bootstrap.py
	$(PYTHON) tools/bootstrap.py --venv $(VENV) --extras gpu

test: $(VENV)/.bootstrap-test
	$(PY) -m pytest -n 2 $(PYTEST_ARGS)

# On a GPU machine the first run fetches the upstream code it lacks (`make upstream`); a failed fetch is printed
# and the cases that need it say so (unsupported, with how to get it). A CPU machine fetches nothing here.
sanitize: $(VENV)/.bootstrap-gpu
	-$(PY) -m gpu_memsafety upstream --if-missing
	$(PY) -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadgroup --mode $(MODE) \
		--report-dir $(REPORTS) $(if $(SHARD),--shard $(SHARD)) $(SCENARIO_ARGS) $(PYTEST_ARGS)

smoke: $(VENV)/.bootstrap-gpu
	$(PY) -m pytest scenarios -p no:cacheprovider -rfEs -m smoke --mode $(MODE) --report-dir $(REPORTS) $(SCENARIO_ARGS) $(PYTEST_ARGS)

bench: $(VENV)/.bootstrap-gpu
	$(PY) -m gpu_memsafety $(SCENARIO_ARGS) bench --out $(REPORTS)/bench $(BENCH_ARGS)

env: $(VENV)/.bootstrap-gpu
	$(PY) -m gpu_memsafety env

# The published upstream code the scenarios run, by exact version (harness/cli/upstream.py): sglang's pre-dispatch
# .cuh and JIT headers, the triton_kernels/ folders of sgl-kernel 0.3.21, sglang-kernel 0.4.6.post1 and 0.4.10,
# unpacked into .vendor/; wheels cached in $$GPU_MEMSAFETY_WHEELS (default ~/.cache/gpu-memsafety/wheels);
# apache-tvm-ffi installed into the venv. Idempotent. Without a GPU the GPU-only wheels are skipped
# (UPSTREAM_ARGS=--all fetches them anyway).
UPSTREAM_ARGS ?=
upstream: $(VENV)/.bootstrap-gpu
	$(PY) -m gpu_memsafety upstream $(UPSTREAM_ARGS)

# Only triton_kernels copy A (sgl-kernel 0.3.21, matmul_ogs API, triton 3.6), as before `make upstream`.
triton-kernels: $(VENV)/.bootstrap-gpu
	$(PY) -m gpu_memsafety upstream --only tk-A --no-tvm-ffi

clean:
	rm -rf $(REPORTS) .cache/runs
