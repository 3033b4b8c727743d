"""The systems load task's grading: a node's score is a pure function of its completion's bytes.

A model with random weights writes no runnable code: on a learning task every node would be
`no_code` or crashed, every sibling group would carry zero reward variance and the learner would
never step, so a run could not measure the system. On a load task (`Task.is_load`, e.g.
`load-bytes`) the grader scores each node by `completion_score(raw_completion)` instead: the same
bytes always give the same score, different bytes give scores spread uniformly over [0, 1), so
groups carry variance and every service does its full work. Such a score says nothing about the
policy: runs of a load task are marked as load runs by the report, never as learning.
"""

from __future__ import annotations

import hashlib

LOAD_SOURCE = "load"  # node.graded `source` of a score that came from completion bytes
_DOMAIN = b"treegrpo/load-bytes/v1\0"  # so a score never equals another use of the same hash
_SCALE = float(2**64)


def completion_score(completion: str | bytes) -> float:
    """The first 8 bytes of sha256(domain ‖ UTF-8 completion) as a fraction of 2**64: in [0, 1),
    with 2**-64 resolution (doubles keep 53 bits: still ~1e-16 apart, ties only for equal bytes in
    practice)."""
    data = completion.encode("utf-8", "surrogatepass") if isinstance(completion, str) else completion
    digest = hashlib.sha256(_DOMAIN + data).digest()
    return min(int.from_bytes(digest[:8], "big") / _SCALE, 1.0 - 2**-53)
