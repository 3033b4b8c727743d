"""The compose dev stack for real (`make stack-test`): the images scripts/stack_images.py built, run
by podman, driven by the real docker compose v2 binary through podman's Docker API. One stack per
session: brought up here (its start-to-healthy time recorded), torn down with its volumes after."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.stack._stack import SERVICES, STACK_DIR, Stack

NUMBERS = STACK_DIR / "numbers.json"


def record(key: str, value) -> None:
    """Numbers for docs/DEPLOY.md and benchmarks/stack_numbers.py: $TREEGRPO_STACK_DIR/numbers.json."""
    data = json.loads(NUMBERS.read_text()) if NUMBERS.exists() else {}
    data[key] = value
    NUMBERS.write_text(json.dumps(data, indent=1))


def tiny_model(path: Path) -> Path:
    """`treegrpo model init --size tiny`, readable by the containers' uid 10001 (transformers writes
    its weights 0600)."""
    from treegrpo.models import build_model

    if not (path / "config.json").exists():
        build_model(path, size="tiny", vocab_size=2048, tokenizer_bytes=1 << 20)
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if p.is_dir() else 0))
    return path


@pytest.fixture(scope="session")
def stack():
    s = Stack()
    tiny_model(s.models / "base")
    s.start_engine()
    s.down()  # whatever an interrupted session left
    try:
        s.up_s = s.up()
        record("up_to_healthy_s", round(s.up_s, 1))
        yield s
    finally:
        logs = STACK_DIR / "logs"
        logs.mkdir(exist_ok=True)
        for name in ("nats", *SERVICES):
            (logs / f"{name}.log").write_text(s.logs(name))
        if not os.environ.get("TREEGRPO_STACK_KEEP"):
            s.down()
        s.close()
