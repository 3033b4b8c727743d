"""Each capability compose.yaml grants the executor is needed by its sandbox: with all of them a
node runs jailed and ends when its script does; without any one of them it does not. (Run with
`podman run` on the executor image, as compose runs it: root, read-only root, no-new-privileges.)"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.stack._stack import DEPLOY

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]
PROBE = Path(__file__).with_name("cap_probe.py")


def probe(caps: list[str]) -> dict:
    argv = ["podman", "run", "--rm", "--read-only", "--tmpfs", "/tmp", "--tmpfs", "/var/lib/treegrpo"]
    argv += ["--user", "0:0", "--cap-drop", "ALL", *[a for c in caps for a in ("--cap-add", c)]]
    argv += ["--security-opt", "no-new-privileges", "-v", f"{PROBE}:/probe.py:ro", "--entrypoint", "python"]
    res = subprocess.run(
        [*argv, "localhost/treegrpo/executor:0.1.0", "/probe.py"], capture_output=True, text=True, timeout=120
    )
    found = re.findall(r"^PROBE (.*)$", res.stdout, re.M)
    assert found, res.stdout[-2000:] + res.stderr[-2000:]
    return json.loads(found[-1])


def test_every_capability_granted_to_the_executor_is_one_its_sandbox_needs():
    granted = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["executor"]["cap_add"]
    assert probe(granted) == {"jailed": True, "status": "ok", "submission": True}
    without = {cap: probe([c for c in granted if c != cap]) for cap in granted}
    # SYS_ADMIN: namespaces and mounts (without it the sandbox falls back to running unjailed);
    # KILL: ending the node's leftover processes (another uid's) when its script exits
    assert without.pop("SYS_ADMIN")["jailed"] is False
    assert without.pop("KILL") == {"jailed": True, "status": "timeout", "submission": False}
    # SETUID, SETGID: the script's own uid; CHOWN, DAC_OVERRIDE, FOWNER: its file system's owner
    assert all("sandbox setup failed" in got.get("error", "") for got in without.values()), without
    print({cap: got.get("error", got) for cap, got in without.items()})
