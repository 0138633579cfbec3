# TARN — the two commands of the README:
#   make lab    bring the lab cluster up with the collection's own roles, then run TARN's main job
#   make test   every test: lint, unit, role scenarios (Molecule) and the lab end to end
SHELL := /bin/bash
.DEFAULT_GOAL := help

HADOOP_VERSION := $(shell sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' lab/hadoop-dist/pom.xml)
VENV    := $(CURDIR)/.venv
BUILD   := $(CURDIR)/build
# Every program the lab and the tests call on this machine, with its package: lab/preflight.sh.
APT_PACKAGES := $(shell lab/preflight.sh --packages)

export PATH := $(VENV)/bin:$(PATH)
export CONTAINERS_CONF := $(CURDIR)/lab/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export TARN_HADOOP_ARCHIVE := $(BUILD)/hadoop/hadoop-$(HADOOP_VERSION).tar.gz
# the lab inventory finds what the host built (the Knox gateway home and plugin, its secrets) here
export TARN_BUILD := $(BUILD)
export MOLECULE_NO_LOG := false
# when this make began: lab/stage.sh prints each stage's time and the total since then
export TARN_T0 ?= $(shell date +%s)
STAGE := lab/stage.sh

.PHONY: help apt venv deps image dist knox java lab lab-nodes lab-site lab-job lab-down test lint sanity unit \
        integration molecule-production molecule-lab e2e-slowed bench generate

help:
	@echo "make lab      bring the lab up (podman nodes + site.yml) and run TARN's main job"
	@echo "make test     run every test (lint, unit, Molecule scenarios, lab end to end)"
	@echo "make lab-down remove the lab nodes"

# ---- what a fresh machine needs: Debian packages, the pinned Python tool chain, the collection link
$(BUILD)/.apt: lab/preflight.sh
	mkdir -p $(BUILD)
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null
	lab/preflight.sh
	touch $@

# uv installs the same pinned set as pip, in about 20 s where pip took 1.5-2.5 min of CI (ansible's
# thousands of files); pip itself stays in the venv for the tools that call it (ansible-test).
$(VENV)/.installed: requirements-dev.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q uv==0.13.9
	$(VENV)/bin/uv pip install -q --python $(VENV)/bin/python -r requirements-dev.txt -e .
	touch $@

$(BUILD)/collections/ansible_collections/tarn/yarn:
	mkdir -p $(dir $@)
	ln -sfn $(CURDIR) $@

apt: $(BUILD)/.apt
venv: $(VENV)/.installed $(BUILD)/collections/ansible_collections/tarn/yarn
deps: apt venv

# The builds need Debian's tools (debootstrap, podman, mvn), not the Python tool chain.
image: apt
	lab/image/build.sh

dist: apt
	lab/hadoop-dist/build.sh $(BUILD)/hadoop

# Knox on the lab's edge (the knox role): the gateway home assembled from Maven Central and
# TARN's plugin jar (its unit tests run in its build). Each script skips what is up to date.
knox: apt
	knox/gateway-dist/build.sh $(BUILD)/knox
	knox/tarn-knox-plugin/build.sh $(BUILD)/knox

# ---- the lab: one progress line per stage (lab/stage.sh). After the Debian packages, three
# builds run side by side: the Python tool chain, the node image (debootstrap), and the Java
# builds (Hadoop then Knox, one after the other: they share ~/.m2). Each skips what is up to date.
lab:
	@$(STAGE) "Debian packages" $(MAKE) --no-print-directory apt
	@$(STAGE) "venv | node image | Hadoop, Knox" $(MAKE) --no-print-directory -j3 --output-sync=target \
		venv image java
	@$(STAGE) "lab nodes" ansible-playbook lab/nodes.yml
	@$(STAGE) "site.yml" ansible-playbook lab/site.yml
	@$(STAGE) "main job" python lab/main_job.py

java: apt
	$(MAKE) --no-print-directory dist
	$(MAKE) --no-print-directory knox

lab-nodes: deps image dist knox
	ansible-playbook lab/nodes.yml

lab-site: lab-nodes
	ansible-playbook lab/site.yml

lab-job:
	python lab/main_job.py

lab-down:
	ansible-playbook lab/nodes.yml -e tarn_lab_state=absent

# ---- the tests: the fast stages first, so that a lint or unit failure stops CI within minutes;
# then sanity, integration and the production scenario beside the lab's converge (lab/test_stages.sh)
test:
	@$(STAGE) "deps" $(MAKE) --no-print-directory deps
	@$(STAGE) "lint" $(MAKE) --no-print-directory lint
	@$(STAGE) "unit" $(MAKE) --no-print-directory unit
	@$(STAGE) "node image | Hadoop, Knox" $(MAKE) --no-print-directory -j2 --output-sync=target image java
	@lab/test_stages.sh

lint: deps
	python -m tarn.ansible_options --check
	ruff check src tests lab bench molecule examples
	ruff format --check src tests lab bench molecule examples
	mypy
	ansible-lint

# The modules' service options and their doc fragment, from tarn.stdlib.config's declaration.
generate: deps
	python -m tarn.ansible_options

# ansible-test fetches get-pip from a host outside the reachable registries; it uses a cached
# copy first, so give it one that bootstraps pip with ensurepip (pip itself comes from PyPI).
ANSIBLE_TEST_GET_PIP := $(HOME)/.ansible/test/cache/get_pip_24_2.py
$(ANSIBLE_TEST_GET_PIP): tests/sanity/get_pip_standin.py
	install -D -m 0644 $< $@

# The copy is a git repository of its own: inside this checkout, build/ is git-ignored and
# ansible-test would find nothing to test.
sanity: deps $(ANSIBLE_TEST_GET_PIP)
	rm -rf $(BUILD)/sanity && mkdir -p $(BUILD)/sanity/ansible_collections/tarn
	rsync -a --exclude .venv --exclude build --exclude .git --exclude .ansible ./ $(BUILD)/sanity/ansible_collections/tarn/yarn/
	cd $(BUILD)/sanity/ansible_collections/tarn/yarn && git init -q && git add -A && \
		ansible-test sanity --python 3.11 --color no

unit: deps
	pytest -n 2 tests/unit

integration: deps $(BUILD)/ranger-harness/ranger-harness.jar
	pytest --durations=15 tests/integration

# Apache Ranger's own policy engine, the reference of tests/integration/test_ranger_conformance.py.
$(BUILD)/ranger-harness/ranger-harness.jar: lab/ranger-harness/pom.xml lab/ranger-harness/build.sh \
		$(shell find lab/ranger-harness/src -type f) | $(BUILD)/.apt
	lab/ranger-harness/build.sh $(BUILD)/ranger-harness

molecule-production: deps image dist
	cd $(CURDIR) && molecule test -s production

# Each scenario alone (make test runs both through lab/test_stages.sh, side by side).
# The verifier writes a JUnit report; on failure its failed tests are printed last, where a
# truncated log still shows them.
molecule-lab: deps image dist knox
	rm -f $(BUILD)/e2e-junit.xml
	cd $(CURDIR) && molecule test -s lab || { python lab/failures.py $(BUILD)/e2e-junit.xml; exit 1; }

# The e2e suite on the lab `make lab` left up, with one of the machine's cores taken by a CPU hog
# (lab/slowed.sh): timing assumptions that hold only on a fast machine fail here first.
e2e-slowed: deps
	lab/slowed.sh pytest -p no:cacheprovider -s --durations=25 tests/e2e

# Every bench that can run here, lab bring-up first: build/bench/report.md with its plots (bench/__main__.py).
bench: deps image dist knox
	python -m bench
