"""Numeric faults of a training step: an overflow, a NaN or an inf is permanent, not a retry.

The same batch from the same weights (and the same settings: an `lr` beyond float32, a reward no
float32 holds) fails the same way every time, so reopening the run and retrying it loops forever.
These are told apart from the faults a reopen does cure (a bus error, a lost rank) at the edge,
where the step's exception reaches the service, and stop the learner with the step and the cause.
"""

from __future__ import annotations

import math
import re

from treegrpo.bus import PermanentError
from treegrpo.finite import nonfinite_in_tensors
from treegrpo_learner._checkpoint import NonFiniteWeights

FLOAT32_MAX = 3.4028234663852886e38
# torch's words for a numeric fault: "value cannot be converted to type float without overflow",
# "probability tensor contains either `inf`, `nan` or element < 0", "... is non-finite"
_TORCH_NUMERIC = re.compile(r"overflow|non-finite|\bnan\b|\binf\b", re.IGNORECASE)


class NonFiniteStep(PermanentError):
    """A training step overflowed or went NaN/inf: nothing of it is saved or published."""


def numeric_fault(exc: BaseException) -> str:
    """The cause when `exc` is a numeric fault of a step, else ''."""
    if isinstance(exc, OverflowError | FloatingPointError):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, RuntimeError) and _TORCH_NUMERIC.search(str(exc)):
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return ""


def step_fault(step: int, cause: str) -> NonFiniteStep:
    return NonFiniteStep(
        f"step {step} overflowed ({cause}); the same batch from the same weights fails the same way, "
        f"so the learner stops: check learner.optimizer.lr and the rewards; nothing of step {step} was saved "
        f"or published (version {step - 1} stands)"
    )


def check_advantage(step: int, group: str, node_id: str, value: float) -> None:
    """An advantage no float32 holds overflows inside the step (on whichever rank trains it)."""
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        raise step_fault(step, f"the advantage {value:g} of node {node_id} in group {group} is not a float32")


def check_finite(step: int, metrics: dict, model) -> None:
    """A NaN/inf loss or weight is never saved or published: the step stops here with a reason
    (the same batch from the same weights would give the same values, so it is not retried)."""
    bad = {k: v for k, v in metrics.items() if not math.isfinite(float(v))}
    params = nonfinite_in_tensors(p for p in model.parameters() if p.requires_grad)
    if bad or params:
        raise NonFiniteWeights(
            f"step {step}: non-finite "
            f"{'metrics ' + str(bad) if bad else ''}{' and ' if bad and params else ''}"
            f"{f'{params} adapter values' if params else ''}; nothing saved or published"
        )
