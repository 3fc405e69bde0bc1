#!/usr/bin/env bash
# Command 2 of the README: install what is missing (zookeeper, .venv), then run the whole
# test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/bootstrap.sh
echo "bootstrap took $(( $(date +%s) - start ))s"
exec .venv/bin/python -m pytest "${@:-tests}"
