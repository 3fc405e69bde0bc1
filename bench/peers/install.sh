#!/usr/bin/env bash
# Installs what bench/peers/run.py compares quire with: the Debian packages redis-server,
# rabbitmq-server and nats-server (their services are NOT started: run.py starts its own
# instances on loopback with temporary data dirs), and the `[peers]` extra of pyproject.toml
# (redis, rstream, nats-py, matplotlib) into the Python that runs the benchmark.
# Not part of scripts/bootstrap.sh: CI never runs the comparison.
#
#   PYTHON=.venv/bin/python bash bench/peers/install.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || [ -x /usr/sbin/rabbitmq-server ] || need+=(rabbitmq-server)
if [ ${#need[@]} -gt 0 ]; then
  echo "peers: apt-get install ${need[*]}"
  $SUDO apt-get update -qq
  # policy-rc.d 101: the packages' own services stay stopped (no systemd in containers either).
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ "$created_policy" = 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d
fi
# The [peers] extra's requirements, read from pyproject.toml (the project itself is not reinstalled).
mapfile -t reqs < <("$PY" - <<'PYEOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["peers"]))
PYEOF
)
echo "peers: pip install ${reqs[*]}"
"$PY" -m pip install -q "${reqs[@]}"
"$PY" -c "import redis, rstream, nats, matplotlib"
echo "peers: ready"
