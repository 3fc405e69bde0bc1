#!/usr/bin/env bash
# Installs what is missing on a fresh Debian machine: Java + the Debian zookeeper package,
# a C compiler and Python's headers, a virtualenv in .venv with quire and every dependency
# (incl. pyspark and the official pulsar-client), then builds the native extensions in place
# (scripts/build_native.py: again whenever their C files change). Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
[ -d /usr/share/zookeeper ] || need_apt+=(zookeeper)
PY=${PYTHON:-python3}
command -v "${CC:-cc}" >/dev/null 2>&1 || need_apt+=(gcc)  # Debian's gcc also installs cc
[ -f /usr/include/string.h ] || need_apt+=(libc6-dev)
venv_py=.venv/bin/python; [ -x "$venv_py" ] || venv_py=$PY  # a venv's headers are its base interpreter's
"$venv_py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || need_apt+=(python3-dev)
[ -x .venv/bin/python ] || "$PY" -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
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
.venv/bin/python scripts/build_native.py
