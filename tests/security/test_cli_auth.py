"""``quire produce|consume|admin`` with --auth-token / --auth-basic against the secured standalone."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.security.conftest import SUPERUSER, SecureNode


def quire(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_AUTH")}
    env["PYTHONPATH"] = os.getcwd()
    return subprocess.run([sys.executable, "-m", "quire", *args], env=env, capture_output=True, text=True, timeout=60)


def test_cli_with_credentials(secure: SecureNode) -> None:
    url = secure.node.url
    token = secure.token("granted")
    topic = "persistent://acme/ns/cli"
    r = quire("produce", topic, "-m", "hello", "--url", url, "--auth-token", token)
    assert r.returncode == 0, r.stderr
    r = quire("consume", topic, "-s", "cli", "--earliest", "--url", url, "--auth-basic",
              f"granted-basic:{secure.passwords['granted-basic']}", "--timeout", "10")
    assert r.returncode == 0 and "hello" in r.stdout, r.stderr
    refused = quire("produce", topic, "-m", "x", "--url", url)
    assert refused.returncode == 1 and "authentication required" in refused.stderr
    admin = quire("admin", "--admin-url", secure.node.admin, "--auth-token", secure.token(SUPERUSER), "tenants", "list")
    assert admin.returncode == 0 and "acme" in admin.stdout, admin.stderr
    denied = quire("admin", "--admin-url", secure.node.admin, "--auth-token", token, "tenants", "list")
    assert denied.returncode == 1 and "not a superuser" in denied.stderr
    assert token not in denied.stderr + refused.stderr
