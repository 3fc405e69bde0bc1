#!/usr/bin/env bash
# Installs what is missing on a fresh Debian machine: Java + the Debian zookeeper package,
# a virtualenv in .venv with quire and every dependency (incl. pyspark and the official
# pulsar-client). Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
[ -d /usr/share/zookeeper ] || need_apt+=(zookeeper)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.quire-deps
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap: installing Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q -e ".[test,spark]" 2>&1 | grep -v "is ignored: it is neither" || true
  .venv/bin/python -c "import quire, trio, kazoo, rocksdict, re2, pulsar, pyspark, fastavro" 
  echo "$want" > "$stamp"
fi
