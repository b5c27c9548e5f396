#!/usr/bin/env bash
# Installs what pathscope needs on Debian 12: system packages (apt-get, as root) and the Python
# virtual environment .venv (pympistandard for the wrapper generator, pytest for the tests).
# Without root and with something missing, prints the exact command to run and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build and test dependencies.  `--test` (make test) adds LAMMPS with its examples and perf
# (tests/e2e/test_perfcompare.py compares sampled shares with perf record on a LAMMPS run), and
# Slurm with munge (nothing is configured here: tests/e2e/test_slurm.py starts its own one-node
# cluster); `--bench` (bench/run-all.sh) adds LAMMPS, perf and the other real applications and
# peers.
PACKAGES=(build-essential cmake pkg-config python3 python3-venv python3-dev
          openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran
          libdw-dev libelf-dev libzydis-dev python3-mpi4py
          clang llvm libbpf-dev bpftool zlib1g-dev   # the eBPF collector (pathscope-kcollect)
          tmux             # tests/e2e/test_top.py drives `pathscope top` in a real terminal
          protobuf-compiler  # protoc: the pprof export's bindings (proto/profile.proto)
          golang-go)       # `go tool pprof` reads the pprof export back (tests/python/test_pprof.py)
case "${1:-}" in
  --test) PACKAGES+=(lammps lammps-examples linux-perf slurmctld slurmd slurm-client munge
                     strace      # strace: tests/python/test_launcher.py
                     chromium chromium-driver) ;;   # tests/e2e/test_html_browser.py
  --bench) PACKAGES+=(lammps lammps-examples linux-perf hpcc gromacs netpipe-openmpi strace
                      bpftrace hyperfine heaptrack
                      chromium chromium-driver) ;;   # bench/html_report.py
esac

# One dpkg-query for all of them: with nothing missing this script is a quiet no-op (under 0.1 s;
# `make build` runs it every time) that neither calls apt-get nor touches .venv.
installed=$'\n'$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)$'\n'
missing=()
for p in "${PACKAGES[@]}"; do
  [[ $installed == *$'\n'"$p installed"$'\n'* ]] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "pathscope: missing system packages: ${missing[*]}" >&2
    echo "pathscope: install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "pathscope: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python environment (Debian's python3: the one mpi4py is built for).  Serialised with a lock:
# several builds may run this at once.
TEXTUAL_VERSION=8.2.8
exec 9>.setup.lock
flock 9
# (find_spec, not import: importing pytest alone takes 0.3 s)
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ('pympistandard', 'pytest')))" 2>/dev/null; then
  rm -rf .venv
  /usr/bin/python3 -m venv --system-site-packages .venv
  .venv/bin/pip install -q --disable-pip-version-check pympistandard==0.2.0 pytest
fi
# The analysis side's libraries (pyproject.toml's dependencies: profiles as pandas DataFrames
# backed by pyarrow, rich for the terminal); `pathscope run` never imports them.
# protobuf: the runtime of protoc 3.21's generated code (the pprof export; 4.21.12 is the release
# of protoc 3.21.12); duckdb: `pathscope sql`.
ANALYSIS_PACKAGES=(pandas==3.1.1 pyarrow==26.0.1 rich==15.0.0 protobuf==4.21.12 duckdb==1.5.6)
if ! .venv/bin/python -c "import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ('pandas', 'pyarrow', 'rich', 'google.protobuf',
                                          'duckdb')))" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "${ANALYSIS_PACKAGES[@]}"
fi
# `pathscope top`'s terminal UI (pyproject.toml's extra `top`; Debian's python3-textual is too old)
if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not u.find_spec('textual'))" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "textual==$TEXTUAL_VERSION"
fi
# Hatchet and Thicket (pyproject.toml's extra `hatchet`; pathscope.hatchet, tests/python/
# hatchet_checks.py) in their own environment .venv-hatchet: llnl-hatchet 2026.2.0 requires
# pandas<3 and .venv keeps pandas 3.1.1, so pandas 2.3.3 lives beside them there.
HATCHET_PACKAGES=(llnl-hatchet==2026.2.0 llnl-thicket==2026.1.1 pandas==2.3.3 pyarrow==26.0.1
                  rich==15.0.0 pytest==9.2.0)
if ! .venv-hatchet/bin/python -c "import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ('hatchet', 'thicket', 'pytest')))" 2>/dev/null; then
  rm -rf .venv-hatchet
  /usr/bin/python3 -m venv .venv-hatchet
  .venv-hatchet/bin/pip install -q --disable-pip-version-check "${HATCHET_PACKAGES[@]}"
fi
# `report --html`'s plotly.js bundle (.deps/html, pinned and checked by sha256)
scripts/fetch-html-deps.sh
# the WebDriver client of the browser tests (make test: tests/e2e/test_html_browser.py) and of
# bench/html_report.py
SELENIUM_VERSION=4.50.0   # (4.52.0 requires certifi>=2026.10.23, not released when pinned)
if [[ ${1:-} == --test || ${1:-} == --bench ]] && ! .venv/bin/python -c "import importlib.util as u, sys
sys.exit(not u.find_spec('selenium'))" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "selenium==$SELENIUM_VERSION"
fi
