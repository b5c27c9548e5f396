# pathscope — the README's two commands: `make demo` and `make test`.
#   make build [MPI=openmpi|mpich]   set up (apt + venv) and build the runtime for one MPI
#   make demo                        build, run the stencil demo on 4 ranks, print the report
#   make check                       build and run the fast unit tiers (C and Python)
#   make test                        build for both MPIs and run every test tier, the
#                                    sanitized runtime's (make sanitize) included
SHELL := /bin/bash
MPI ?= openmpi
ifeq ($(MPI),openmpi)
  MPICC = mpicc.openmpi
  MPIFORT = mpifort.openmpi
  MPIRUN = mpirun.openmpi --allow-run-as-root --oversubscribe
else ifeq ($(MPI),mpich)
  MPICC = mpicc.mpich
  MPIFORT = mpifort.mpich
  MPIRUN = mpirun.mpich
else
  $(error MPI must be openmpi or mpich, not '$(MPI)')
endif
BUILD = build/$(MPI)
PY = .venv/bin/python
JOBS ?= 2

.PHONY: all setup mpi4py-deps test-deps build build-all demo check sanitize test test-mpi4py \
  bench clean

all: build

setup:
	@scripts/setup.sh

# mpi4py test suites for tests/transparency (Open MPI: Debian's mpi4py; MPICH: .deps/venv-mpich)
mpi4py-deps: setup
	@scripts/setup-mpi4py.sh

# $(call configure,DIR,ARGS): cmake's configure step, showing what it says that matters --
# pathscope's own lines (`-- pathscope: ...`, e.g. which MPI, or why the eBPF collector is not
# built) and every warning and error (stderr) -- without CMake's routine lines.
define configure
	@set -o pipefail; cmake -S . -B $(1) $(2) | sed -n 's/^-- pathscope: /pathscope: /p'
endef
# $(call compile,DIR,ARGS): cmake's build step without its progress lines or make's
# `Entering directory` lines.
define compile
	@set -o pipefail; cmake --build $(1) -j $(JOBS) $(2) -- --no-print-directory 2>&1 \
	  | { grep -v '^\[' || true; }
endef

build: setup
	$(call configure,$(BUILD),-DPS_MPI=$(MPI) -DPS_MPICC=$(MPICC) -DPS_MPIFORT=$(MPIFORT) \
	  -DPS_PYTHON=$(CURDIR)/$(PY) -DPS_MPIRUN="$(MPIRUN)" -DCMAKE_BUILD_TYPE=RelWithDebInfo)
	$(call compile,$(BUILD))
	@echo "pathscope: built $(BUILD)/libpathscope.so; CLI: bin/pathscope"

build-all:
	@$(MAKE) --no-print-directory build MPI=openmpi
	@$(MAKE) --no-print-directory build MPI=mpich

demo: build
	@rm -rf $(BUILD)/demo-profile
	$(MPIRUN) -np 4 bin/pathscope run -o $(BUILD)/demo-profile -- $(BUILD)/stencil 512 200
	bin/pathscope report $(BUILD)/demo-profile

# packages only the tests need (LAMMPS and perf: tests/e2e/test_perfcompare.py; Slurm and
# munge: tests/e2e/test_slurm.py)
test-deps: setup
	@scripts/setup.sh --test

# The fast unit tiers (about a minute once built): the C unit tests (ctest) and the Python
# unit tests (tests/python).  `make test` runs them too, with everything else.
check: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(PY) -m pytest -q tests/python

# The runtime with AddressSanitizer + UndefinedBehaviorSanitizer (build/asan, Open MPI): the
# C unit tests and a few MPI programs with it preloaded behind libasan
# (tests/unit/sanitize/check_run.py).  Builds only what it runs.
SAN_BUILD = build/asan
sanitize: setup
	$(call configure,$(SAN_BUILD),-DPS_SANITIZE=ON -DPS_MPI=openmpi -DPS_MPICC=mpicc.openmpi \
	  -DPS_MPIFORT= -DPS_PYTHON=$(CURDIR)/$(PY) \
	  -DPS_MPIRUN="mpirun.openmpi --allow-run-as-root --oversubscribe" \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo)
	$(call compile,$(SAN_BUILD),--target sanitize)
	@cd $(SAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L 'unit|sanitize'

test: build-all mpi4py-deps test-deps
	@status=0; for mpi in openmpi mpich; do echo "pathscope: ctest in build/$$mpi"; \
	  (cd build/$$mpi && ctest --output-on-failure -j $(JOBS)) || status=1; done; exit $$status
	@$(MAKE) --no-print-directory sanitize
	@$(PY) -m pytest -q tests

test-mpi4py: build-all mpi4py-deps
	@$(PY) -m pytest -q tests/transparency

bench:
	bench/run-all.sh

clean:
	rm -rf build
