"""What the read verbs answer besides events: a run's start and its ends, and the count of reads.

`Reads` is what `Bus.reads` counts, so a test or a benchmark can say how many requests (and how
many payload bytes) a piece of work costs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from treegrpo import events
from treegrpo.config import RunSpec


@dataclass(frozen=True)
class RunEnds:
    """A run's lifecycle facts: attempts = 1 + resumes; open while fewer attempts ended."""

    started: bool
    completed: bool
    ended: int  # run.ended facts (one per attempt that ended)
    resumed: int  # run.resumed facts

    @property
    def attempt(self) -> int:
        return 1 + self.resumed

    @property
    def open(self) -> bool:
        return self.started and not self.completed and self.ended < self.attempt


@dataclass
class Reads:
    """The read requests a `Bus` sent, by what they are (tests and benchmarks count them)."""

    lookups: int = 0  # direct gets of one subject's last message (`last_event`)
    batches: int = 0  # batched direct gets of many subjects' last messages (`last_events`)
    consumers: int = 0  # read consumers opened (one per replay or `last_events`; more after stalls)
    fetches: int = 0  # pull fetches over those consumers
    infos: int = 0  # stream-info requests (a run's subjects, its ends, the runs)
    messages: int = 0  # messages the fetches and batches brought (replays, `last_events`)
    # payload bytes the lookups, batches and fetches brought (what the reads carried); not compared,
    # so the counts of requests stay what tests pin
    payload_bytes: int = field(default=0, compare=False)

    @property
    def total(self) -> int:
        """Requests sent (messages are not requests)."""
        return self.lookups + self.batches + self.consumers + self.fetches + self.infos


@dataclass(frozen=True)
class RunStart:
    """A run's `run.started`: what the run is, and who started it."""

    spec: RunSpec
    producer: str

    @property
    def imported(self) -> bool:
        """History read back from an archive (`treegrpo archive import`): never work to redo."""
        return self.producer == events.IMPORTED_PRODUCER


def attempts(ended: Iterable[int], resumed: Iterable[int]) -> tuple[int, int]:
    """(the run's attempt, how many of its attempts ended): only resumes 2, 3, .. k in a row open
    attempts, and only ends of attempts 1 .. k count, so a fact of an attempt that never was (a
    forgery, fuzz) neither ends nor reopens a run."""
    opened, attempt = set(resumed), 1
    while attempt + 1 in opened:
        attempt += 1
    return attempt, len({a for a in ended if 1 <= a <= attempt})
