#!/usr/bin/env bash
# Command 1 of the README: install what is missing, then run `quire standalone`
# (broker on pulsar://localhost:6650, admin on http://localhost:8080, data under ./data).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/quire standalone "$@"
