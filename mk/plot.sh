#!/usr/bin/env bash
# Runs mk/plot.py with a Python that has matplotlib: python3 on PATH, else Debian's /usr/bin/python3
# (where `make deps` installs python3-matplotlib; a pyenv or venv python3 on PATH may lack it).
#   mk/plot.sh --check   exit 0 if such a Python exists, else 1 (make deps, mk/gpu-run.sh, the tests)
#   mk/plot.sh ARGS...   mk/plot.py ARGS...; exit 3 with a message when there is no matplotlib
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import matplotlib' >/dev/null 2>&1; then
    [ "${1:-}" = --check ] && exit 0
    MPLBACKEND=Agg exec "$py" "$(dirname "$0")/plot.py" "$@"
  fi
done
[ "${1:-}" = --check ] && exit 1
echo "plot: no Python with matplotlib (tried python3, /usr/bin/python3): make deps installs python3-matplotlib" >&2
exit 3
