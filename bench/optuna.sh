#!/usr/bin/env bash
# Optuna's TPE and random samplers on hone's benchmark suite: makes a virtual environment
# (bench/.venv-optuna, ignored by git), installs optuna from PyPI into it, and runs
# bench/optuna_baseline.py with the arguments given (see its --help), e.g.
#   bench/optuna.sh --repeats 10 --budget 20,50,100 --out bench/out/optuna-runs.json
# Then report it beside hone's arms: hone bench --with bench/out/optuna-runs.json ...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${OPTUNA_VENV:-$here/.venv-optuna}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q optuna
fi
exec "$venv/bin/python" "$here/optuna_baseline.py" "$@"
