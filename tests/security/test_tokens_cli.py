"""``quire tokens`` as a person runs it (subprocesses), checked against the verifier."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from quire.security.tokens import TokenVerifier


def quire(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "quire", "tokens", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_secret_key_create_show_validate(tmp_path: Path) -> None:
    assert quire("create-secret-key", "--output", "secret.key", cwd=tmp_path).returncode == 0
    key = (tmp_path / "secret.key").read_bytes()
    assert len(key) == 32 and (tmp_path / "secret.key").stat().st_mode & 0o077 == 0
    made = quire("create", "--secret-key", f"file://{tmp_path}/secret.key", "--subject", "alice",
                 "--expiry-time", "1h", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert TokenVerifier(secret_key=key).verify(token).role == "alice"
    shown = quire("show", "-i", token, cwd=tmp_path).stdout.splitlines()
    assert json.loads(shown[0])["alg"] == "HS256" and json.loads(shown[1])["sub"] == "alice"
    ok = quire("validate", "-sk", "secret.key", "-i", token, cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["sub"] == "alice"
    quire("create-secret-key", "--output", "other.key", cwd=tmp_path)
    bad = quire("validate", "-sk", "other.key", "-i", token, cwd=tmp_path)
    assert bad.returncode == 1 and "signature" in bad.stderr and token not in bad.stderr + bad.stdout


def test_key_pair(tmp_path: Path) -> None:
    r = quire("create-key-pair", "--output-private-key", "priv.key", "--output-public-key", "pub.key", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    token = quire("create", "-pk", "priv.key", "-s", "svc", cwd=tmp_path).stdout.strip()
    v = quire("validate", "--public-key", "pub.key", "-i", token, cwd=tmp_path)
    assert v.returncode == 0 and json.loads(v.stdout) == {"sub": "svc"}
