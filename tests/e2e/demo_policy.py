"""The SFT'd demo policy for the slow suites, built once under a lock (not a test module).

The `demo_policy` session fixture (conftest.py) builds it with `prepare_demo_policy`, exactly as
`make demo` does, under a fresh folder. `.ci/run` can start the same build earlier, in the
background beside lint and `make test`, in a folder of its own made for that CI run:

    python -m tests.e2e.demo_policy DIR

and hands the folder to the suites as $TREEGRPO_TEST_DEMO_POLICY. The fixture then takes the same
lock, so it waits for a build still going instead of starting a second one, and calls
`prepare_demo_policy` on the folder: a finished build is returned as its cache returns it (same
fingerprint: corpus, templates, size, SFT recipe), a failed or missing one is built again by the
fixture itself, whose error the test then shows. The folder is never one from an earlier checkout.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

FOLDER_ENV = "TREEGRPO_TEST_DEMO_POLICY"


def build(root: Path) -> Path:
    """The demo policy under root/demo (its tasks under root/home), built unless already built
    there; waits, on root/lock, for another process building it."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # dropped on close, or when a builder dies
        return _prepare(root)
    finally:
        os.close(fd)


def _prepare(root: Path) -> Path:
    from treegrpo_learner.sft import prepare_demo_policy

    # the SFT's prompts show each task's public folder: the tasks go under a home of its own
    before = os.environ.get("TREEGRPO_HOME")
    os.environ["TREEGRPO_HOME"] = str(root / "home")
    try:
        return prepare_demo_policy(root / "demo", show_progress=False)
    finally:
        if before is None:
            os.environ.pop("TREEGRPO_HOME")
        else:
            os.environ["TREEGRPO_HOME"] = before


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as tests/conftest.py, before torch
    print(build(Path(sys.argv[1])))
