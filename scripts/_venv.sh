# Sourced by scripts/demo and scripts/test: make sure .venv exists and is installed.
# Re-installs when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.rolecall-installed"

find_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "rolecall needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

want="$(cat "$ROOT/pyproject.toml" | cksum)"
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    py="$(find_python)"
    echo "creating .venv with $py" >&2
    "$py" -m venv "$VENV"
  fi
  echo "installing rolecall into .venv (first run takes a minute)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  # the dev tools are the PEP 735 group "dev" of pyproject.toml (pip 25.1+ reads groups)
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -e "$ROOT" --group "$ROOT/pyproject.toml:dev" >&2
  echo "$want" >"$STAMP"
fi
