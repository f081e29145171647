# robopin developer entry points. `make test` is the README's test command and what .ci/run calls.
VENV   ?= .venv
PYTHON := $(VENV)/bin/python
RUFF   := $(VENV)/bin/ruff
LINT_PATHS := src ros2_ws/src/robopin_ros tests benchmarks
# Per-test ceiling: a hung DDS peer or simulator must fail the run, not eat the CI budget. The thread
# method also ends a test stuck inside C code (a signal handler would never run there).
PYTEST_ARGS ?= -q --timeout=600 --timeout-method=thread -p no:cacheprovider

.PHONY: setup lint test bench clean

setup:  ## venv, pinned ROS 2 Jazzy wheels, robopin_interfaces built, packages editable (idempotent)
	bash scripts/setup.sh

lint: setup
	$(RUFF) check $(LINT_PATHS)

test: setup lint  ## setup + lint + the whole test suite
	$(PYTHON) -m pytest $(PYTEST_ARGS)

bench: setup  ## every benchmark in benchmarks/ (figures + ratio to a same-run baseline; never pass/fail)
	@set -e; for bench in benchmarks/bench_*.py; do \
		echo "=== $$bench"; $(PYTHON) $$bench; done

.PHONY: check-curobo

check-curobo: setup  ## on a machine with an NVIDIA GPU and cuRobo: contract tests + cuRobo planning times (runbook step 3)
	bash scripts/check_curobo.sh

.PHONY: demo trial

demo: setup  ## the main job: simulated Panda workcell, every node in one process, spatial task as an ExecuteTask goal
	$(VENV)/bin/robopin up config/sim_panda.yaml --demo

# RoboPIN's three real-robot tasks x 20 seeds on the simulated Panda and xArm 6 with the oracle, on two Ray workers
# (11 min on 2 cores).
TRIAL_ARGS ?= spatial multi_view long_horizon --seeds 20 --system sim_panda --system sim_xarm6 --workers 2 --out trials/oracle
trial: setup  ## success table + failures by reason + stage timing: trials/oracle/results.md and report.html
	$(VENV)/bin/robopin trial $(TRIAL_ARGS) --resume

clean:  ## remove build outputs (the venv stays; delete .venv by hand for a cold setup)
	rm -rf build
