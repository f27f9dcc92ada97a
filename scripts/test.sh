#!/usr/bin/env bash
# README's test command: installs and starts what the tests need, then runs the whole suite.
#
# As root (CI, cloud containers) it installs the missing Debian packages (bubblewrap for the
# containment tests, chromium and chromium-driver for the dashboard's browser test, slurm-wlm and
# munge for the SLURM tests, postgresql for the remote-worker and store tests), starts a one-node
# SLURM cluster, and makes those tests required. Not as root, it runs what this machine allows:
# the SLURM and PostgreSQL tests say they skipped, and the browser test needs
# HONE_SKIP_BROWSER_TESTS=1 when chromium is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then
  need=()
  command -v git >/dev/null 2>&1 || need+=(git)
  command -v python3 >/dev/null 2>&1 || need+=(python3)
  command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
  command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
  command -v chromedriver >/dev/null 2>&1 || need+=(chromium chromium-driver)
  command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
  command -v munged >/dev/null 2>&1 || need+=(munge)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
  fi
  # A one-node SLURM cluster (slurmctld, slurmd, munged on this machine). The daemons this
  # script starts are stopped when it ends (HONE_KEEP_SERVICES=1 keeps them for the next run;
  # `scripts/slurm-local.sh --stop` stops them later).
  started=()
  for d in slurmctld slurmd munged; do
    pgrep -x "$d" >/dev/null 2>&1 || started+=("$d")
  done
  if [ "${HONE_KEEP_SERVICES:-0}" != 1 ] && [ ${#started[@]} -gt 0 ]; then
    trap 'for d in "${started[@]}"; do pkill -x "$d" 2>/dev/null || true; done' EXIT
  fi
  scripts/slurm-local.sh
  export HONE_REQUIRE_SLURM=1
  # The PostgreSQL tests start their own server in a temporary directory.
  export HONE_REQUIRE_POSTGRES=1
fi

# The dashboard's browser test leaves screenshots of the run and experiment pages in
# screenshots/ under the cargo target directory.
# `test-agent` builds `fake-agent`, the scripted agent the CLI tests drive (never installed).
cargo test --workspace --features hone-cli/test-agent "$@"
