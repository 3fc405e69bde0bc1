"""docs/quickstart.md runs: every shell command and Python snippet in it, against a real standalone.

Shell lines marked "not run by the test" (installing, starting the node) are skipped; the
others run with the node's real URLs added (``--url`` / ``--admin-url``), and Python snippets
run with ``pulsar://localhost:6650`` replaced by the node's URL. A command that fails, or a doc
that no longer parses, fails here, so the quickstart cannot rot.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.conftest import Standalone, start_standalone

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "quickstart.md"
SERVICE_URL_FLAG = {"produce", "consume", "read", "perf"}


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def shell_commands() -> list[str]:
    out = []
    for block in blocks("sh"):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "not run by the test" not in line:
                out.append(line)
    return out


def argv(command: str, node: Standalone) -> list[str]:
    words = shlex.split(command)
    assert words[0] == "quire", f"quickstart command not run through quire: {command}"
    words = [sys.executable, "-m", "quire", *words[1:]]
    if words[3] in SERVICE_URL_FLAG:
        words += ["--url", node.url]
    elif words[3] in ("admin", "cluster-status"):
        words[4:4] = ["--admin-url", node.admin]
    return words


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    n = start_standalone(tmp_path_factory.mktemp("quickstart"))
    try:
        yield n
    finally:
        n.proc.terminate()


def test_the_doc_has_what_the_test_runs() -> None:
    assert len(shell_commands()) >= 8 and len(blocks("python")) == 2


def test_quickstart_shell_commands_run(node: Standalone) -> None:
    outputs = {}
    for command in shell_commands():
        res = subprocess.run(argv(command, node), capture_output=True, text=True, timeout=90, cwd=ROOT)
        assert res.returncode == 0, f"`{command}` exited {res.returncode}:\n{res.stdout}\n{res.stderr}"
        outputs[command] = res.stdout
    consumed = next(v for k, v in outputs.items() if k.startswith("quire consume"))
    assert consumed.count("hello") == 3
    assert '"retentionTimeInMinutes": 60' in next(v for k, v in outputs.items() if "get-retention" in k)
    peeked = next(v for k, v in outputs.items() if "peek-messages" in k)
    assert "content:hello" in peeked
    assert "bookies (1, 1 writable)" in next(v for k, v in outputs.items() if k.startswith("quire cluster-status"))


@pytest.mark.parametrize("index", [0, 1], ids=["clients", "official-client"])
def test_quickstart_python_snippets_run(node: Standalone, index: int) -> None:
    code = blocks("python")[index].replace("pulsar://localhost:6650", node.url)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("message-2" in res.stdout) if index == 0 else ("from the official client" in res.stdout)
