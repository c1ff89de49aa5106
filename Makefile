# Two commands set up a fresh machine and run: `make test` (the harness's own tests, CPU) and
# `make sanitize` (every scenario under guard markers and memcheck, one xdist worker per GPU).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REPORTS ?= reports
MODE ?= both
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: test sanitize smoke bench env triton-kernels clean

$(VENV)/.bootstrap-test: pyproject.toml tools/bootstrap.py
	$(PYTHON) tools/bootstrap.py --venv $(VENV) --extras test

$(VENV)/.bootstrap-gpu: pyproject.toml tools/bootstrap.py
	$(PYTHON) tools/bootstrap.py --venv $(VENV) --extras gpu

test: $(VENV)/.bootstrap-test
	$(PY) -m pytest -n 2 $(PYTEST_ARGS)

sanitize: $(VENV)/.bootstrap-gpu
	$(PY) -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadfile --mode $(MODE) \
		--report-dir $(REPORTS) $(PYTEST_ARGS)

smoke: $(VENV)/.bootstrap-gpu
	$(PY) -m pytest scenarios -p no:cacheprovider -rfEs --tag smoke --mode $(MODE) --report-dir $(REPORTS) $(PYTEST_ARGS)

bench: $(VENV)/.bootstrap-gpu
	$(PY) -m harness bench --out $(REPORTS)/bench $(BENCH_ARGS)

env: $(VENV)/.bootstrap-gpu
	$(PY) -m harness env

# OpenAI's triton_kernels as bundled in the sgl-kernel 0.3.21 wheel (matmul_ogs API, runs on triton 3.6).
# Only its pure-Python triton_kernels/ folder is unpacked into .vendor/ (the wheel's CUDA libraries are not
# installed); the locator in kernels/mxfp4/triton_kernels_locator.py finds it there.
TK_WHEEL_VERSION ?= 0.3.21
triton-kernels: $(VENV)/.bootstrap-gpu
	$(PY) -m pip download --no-deps --only-binary=:all: sgl-kernel==$(TK_WHEEL_VERSION) -d .cache/wheels
	rm -rf .vendor/sgl-kernel-$(TK_WHEEL_VERSION) && mkdir -p .vendor/sgl-kernel-$(TK_WHEEL_VERSION)
	$(PY) -c "import zipfile,glob,sys; z=zipfile.ZipFile(sorted(glob.glob('.cache/wheels/sgl_kernel-$(TK_WHEEL_VERSION)-*.whl'))[-1]); [z.extract(n,'.vendor/sgl-kernel-$(TK_WHEEL_VERSION)') for n in z.namelist() if n.startswith('triton_kernels/')]"
	@echo "triton_kernels unpacked into .vendor/sgl-kernel-$(TK_WHEEL_VERSION)/triton_kernels"

clean:
	rm -rf $(REPORTS) .cache/runs
