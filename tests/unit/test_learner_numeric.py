"""Numeric faults of a training step are told apart from the faults a reopen cures.

Imports a private module: `treegrpo_learner._numeric` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import pytest

from treegrpo_learner._numeric import NonFiniteStep, check_advantage, numeric_fault, step_fault

pytestmark = pytest.mark.timeout(60)


def test_torchs_own_overflow_and_pythons_are_numeric_faults_and_other_errors_are_not():
    import torch

    with pytest.raises(RuntimeError) as overflow:
        torch.full((2,), 1e39, dtype=torch.float32)  # what an lr or advantage beyond float32 does
    assert "without overflow" in numeric_fault(overflow.value)
    assert numeric_fault(OverflowError("math range error")) == "OverflowError: math range error"
    assert numeric_fault(RuntimeError("probability tensor contains either `inf`, `nan` or element < 0"))
    assert numeric_fault(RuntimeError("the learner's ranks failed earlier; reopen the run")) == ""
    assert numeric_fault(ConnectionError("nats: connection closed")) == ""
    assert numeric_fault(RuntimeError("information about nanoseconds")) == ""


def test_an_advantage_no_float32_holds_is_a_permanent_fault_naming_the_step_and_the_node():
    check_advantage(3, "g1", "n1", 3.0e38)  # the largest float32 is fine
    for bad in (3.5e38, -1e39, float("inf"), float("nan")):
        with pytest.raises(NonFiniteStep) as err:
            check_advantage(3, "g1", "n1", bad)
        assert err.value.reason.startswith("step 3 overflowed (the advantage")
        assert "of node n1 in group g1 is not a float32" in err.value.reason


def test_the_reason_says_what_stands_and_what_to_check():
    reason = step_fault(5, "RuntimeError: x").reason
    assert "step 5 overflowed (RuntimeError: x)" in reason and "learner.optimizer.lr" in reason
    assert "version 4 stands" in reason
