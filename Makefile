# The course's two commands:  `make course` (set up + open JupyterLab)  and  `make test` (every test).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Tests and headless runs: no display, no network, and (for tests) the quick sizes of mlm_course.settings.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
QUICK   := MLM_COURSE_QUICK=1
# one torch thread per test process: `make test` runs two (pytest -n 2) on a 2-core machine, and two threads each
# fighting for the cores made the notebooks' training cells 4x slower (05's cell 12: 64 s against 16 s)
THREADS := OMP_NUM_THREADS=1
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))

.PHONY: setup course execute execute-zh test lint bench book gpu-check clean

setup: $(STAMP)

# mlm_course/lab/setup.py: the venv, the torch that fits this machine, the package with [test], MiniLM, the kernel
# (the README's command for machines without make).
$(STAMP): pyproject.toml mlm_course/lab/setup.py
	$(PYTHON) -m mlm_course.lab.setup --venv $(VENV)
	touch $@

## Set up (first time only) and open the course in JupyterLab.
course: setup
	$(BIN)/jupyter lab notebooks/

## Headless: run every notebook top to bottom in full mode and store the outputs in place.
execute: setup
	@for nb in $(NOTEBOOKS); do echo "== $$nb"; \
	  $(OFFLINE) $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --NotebookExporter.preprocessors='["nbconvert.preprocessors.CoalesceStreamsPreprocessor"]' \
	    --ExecutePreprocessor.timeout=3600 "$$nb" || exit 1; done

## Headless, after `make execute`: run the Chinese edition (notebooks/zh/) in full mode; only its figures, drawn in
## Chinese, are kept (every other output stays the English one). See scripts/execute_chinese.py.
execute-zh: setup
	$(BIN)/python scripts/execute_chinese.py

## Every test: lint, unit tests, and nbval over every notebook (quick mode, offline).
test: setup lint
	$(OFFLINE) $(QUICK) $(THREADS) $(BIN)/python -m pytest -n 2 --dist loadfile --nbval-lax \
	  --durations=15 tests $(NOTEBOOKS)

lint: setup
	$(BIN)/ruff check mlm_course tests scripts benchmarks notebooks book

## The course as a static site, both editions, from the notebooks as committed (nothing executed): Sphinx + myst-nb
## (the `book` extra, which `make setup` installs with `test`); open build/book/html/index.html. scripts/book_site.py
book: setup
	$(BIN)/python scripts/book_site.py build/book/html

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(OFFLINE) $(BIN)/python $$b || exit 1; done

## On a machine with an NVIDIA GPU (≤ 8 min on one H200), installing nothing: CUDA tests, fine-tuning throughput vs
## Trainer (eager, compiled), 2 min of pretraining, fine-tunes in bf16 (fp16 before compute capability 8.0); writes
## benchmarks/results/gpu_check.json after every step. Uses .venv/bin/python, else python3; on a preinstalled image
## (CUDA torch in the system Python, no package index): bash scripts/gpu_check.sh --python python3.
## `bash scripts/gpu_check.sh --dry-run --python "$(which python)" --out FILE` checks the check on a CPU.
gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
