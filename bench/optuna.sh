#!/usr/bin/env bash
# Optuna's TPE, CMA-ES, GP and random samplers on hone's benchmark suite: makes a virtual
# environment (bench/.venv-optuna, ignored by git), installs optuna, cmaes and scipy from PyPI
# into it (and torch for the GP sampler where it installs: CPU wheels first), and runs
# bench/optuna_baseline.py with the arguments given (see its --help), e.g.
#   bench/optuna.sh --repeats 10 --budget 20,50,100 --out bench/out/optuna-runs.json
#   bench/optuna.sh --samplers tpe,cmaes,gp,random --in-process ...   (synthetic problems, fast)
# Then report it beside hone's arms: hone bench --with bench/out/optuna-runs.json ...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${OPTUNA_VENV:-$here/.venv-optuna}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# An environment made earlier (or by hand) may lack a package: check, and install what is missing.
if ! "$venv/bin/python" -c "import optuna, cmaes, scipy" 2>/dev/null; then
  "$venv/bin/pip" install -q optuna cmaes scipy
fi
# torch only for the GP sampler, asked for by name (the default is tpe,random).
if [[ " $* " == *gp* ]] && ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  "$venv/bin/pip" install -q torch --index-url https://download.pytorch.org/whl/cpu \
    || "$venv/bin/pip" install -q torch || echo "torch did not install: no GP sampler" >&2
fi
exec "$venv/bin/python" "$here/optuna_baseline.py" "$@"
