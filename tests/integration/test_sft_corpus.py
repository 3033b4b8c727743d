"""The corpus manifest tells the truth: a sample of scripts re-run and re-graded gives what it records."""

from __future__ import annotations

import pytest

from treegrpo.tasks import ensure_builtin_tasks
from treegrpo_learner.sft import load_corpus
from treegrpo_learner.sft.verify_corpus import verify

pytestmark = pytest.mark.timeout(300)

# a valid script and one broken copy of a valid script per failure kind seen by the grader
SAMPLE = ["18_stats_lr", "21_bug_wrong_column", "25_bug_no_write", "26_bug_unnormalised"]


def test_a_sample_of_corpus_scripts_reproduces_its_recorded_outcome(tmp_path, monkeypatch):
    monkeypatch.setenv("TREEGRPO_HOME", str(tmp_path))
    tasks = ensure_builtin_tasks(tasks=["spooky-mini"])
    scripts = {s.name: s for s in load_corpus() if s.task == "spooky-mini"}
    for name in SAMPLE:
        s = scripts[name]
        got = verify(s, tasks, timeout_s=240)
        assert got.status == s.verified.status == s.intended, (name, got.output[-500:])
        assert got.exc_type == s.verified.exc_type
        if s.verified.test_metric is not None:
            assert got.test_metric == pytest.approx(s.verified.test_metric, abs=1e-4)
