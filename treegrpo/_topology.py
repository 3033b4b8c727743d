"""Who publishes each event kind and which services consume it: the one table of the event flow.

`tests/unit/test_topology.py` holds the code to it both ways: every service's `handlers()` are
exactly the kinds that name it a consumer, and the event bodies each producer's package builds
are exactly the kinds that name it a producer. docs/CONTRACTS.md carries the table as
`topology_markdown()` writes it (`python -m treegrpo._topology` prints it; a test compares).

Consumers are the services that take a kind as work (a durable consumer filtered to it). Reads
that are not work, a `Bus.last_event` lookup or a replay, are not listed: every projection
(`treegrpo archive export`, `treegrpo report`, `treegrpo events`) reads every kind, and history
appended by `treegrpo archive import` may carry any kind under the producer `archive-import`.
"""

from __future__ import annotations

from dataclasses import dataclass

from treegrpo._kinds import Kind

RUNNER = "runner"  # `treegrpo run` (treegrpo/runner/)
SAMPLER = "sampler"  # the services (services/<name>/, registered by entry points: treegrpo/plugins.py)
EXECUTOR = "executor"
GRADER = "grader"
LEARNER = "learner"
SERVICES = (SAMPLER, EXECUTOR, GRADER, LEARNER)  # in the order the runner starts them
CONSUMER = "consumer"  # any service's consumer loop (treegrpo/bus/), onto the dead-letter stream


@dataclass(frozen=True)
class Route:
    """One kind's producers (who may publish it) and consumers (whose handlers take it)."""

    producers: frozenset[str]
    consumers: frozenset[str]
    why: str  # what the fact says, one line for the docs


def _route(producers: set[str], consumers: set[str], why: str) -> Route:
    return Route(frozenset(producers), frozenset(consumers), why)


TOPOLOGY: dict[Kind, Route] = {
    Kind.RUN_STARTED: _route({RUNNER}, {SAMPLER, LEARNER}, "a run began: its RunSpec"),
    # the sampler publishes it too when it runs without a runner (`publish_run_completed`)
    Kind.RUN_COMPLETED: _route({RUNNER, SAMPLER}, {SAMPLER}, "every round of the run is complete"),
    Kind.RUN_ENDED: _route({RUNNER}, {SAMPLER, LEARNER}, "an attempt ended: completed, stopped or failed"),
    Kind.RUN_RESUMED: _route({RUNNER}, {SAMPLER}, "`--resume` reopened an ended run"),
    Kind.ROUND_STARTED: _route({SAMPLER}, set(), "a task's round began sampling"),
    Kind.ROUND_COMPLETED: _route({SAMPLER}, set(), "a task's round is complete: its summary"),
    Kind.NODE_SAMPLED: _route({SAMPLER}, {EXECUTOR}, "a node's place in the tree, completion and code"),
    Kind.NODE_EXECUTED: _route({EXECUTOR}, {GRADER}, "a node's script ran: status, output tail, submission"),
    Kind.NODE_GRADED: _route({GRADER}, set(), "a node's final status and score"),
    Kind.NODE_RETRIED: _route(
        {RUNNER}, {EXECUTOR}, "`--resume --retry-masked`: a masked node runs again as a new attempt"
    ),
    Kind.GROUP_SCORED: _route({GRADER}, {SAMPLER, LEARNER}, "every sibling of a group is graded: rewards"),
    Kind.LEARNER_STEPPED: _route({LEARNER}, set(), "one training step: timings and metrics"),
    Kind.LEARNER_RESTORED: _route(
        {LEARNER}, set(), "the learner reopened a trained run: where its weights came from, what was lost"
    ),
    Kind.POLICY_PUBLISHED: _route({LEARNER}, {SAMPLER}, "a new policy version's adapter is stored"),
    Kind.POLICY_LOADED: _route({SAMPLER}, set(), "a sampler serves a policy version now"),
    Kind.DEAD_LETTERED: _route({CONSUMER}, set(), "a message no handler could process (dead-letter stream)"),
    # the learner looks the decision up (a read, not work): it tells it which groups of a round follow
    Kind.GROUP_RESPENT: _route(
        {SAMPLER}, set(), "a zero-variance group's re-spend decision: new siblings, parent, why"
    ),
    # the learner looks it up with the group's node.sampled facts (one batched read per group);
    # export and report replay it; the executor and grader never read it
    Kind.TOKENS_RECORDED: _route(
        {SAMPLER}, set(), "a node's training payload: prompt, prompt and response token ids, logprobs"
    ),
}


_SHOWN = {CONSUMER: "any service's consumer loop"}


def producers_of(name: str) -> set[Kind]:
    return {k for k, r in TOPOLOGY.items() if name in r.producers}


def consumed_by(name: str) -> set[Kind]:
    return {k for k, r in TOPOLOGY.items() if name in r.consumers}


def topology_markdown() -> str:
    """The table as docs/CONTRACTS.md states it."""
    rows = ["| kind | body | producers | consumers | the fact |", "|---|---|---|---|---|"]
    for kind, r in TOPOLOGY.items():
        body = "".join(p.title() for p in kind.field.split("_"))
        consumers = ", ".join(sorted(r.consumers)) or "—"
        producers = ", ".join(_SHOWN.get(p, p) for p in sorted(r.producers))
        rows.append(f"| `{kind.value}` | `{body}` | {producers} | {consumers} | {r.why} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- topology:begin -->\n", "<!-- topology:end -->"


def write_into(path: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the table between the markers of a markdown file (docs/CONTRACTS.md)."""
    with open(path) as fh:
        head, rest = fh.read().split(begin, 1)
    tail = rest.split(end, 1)[1]
    with open(path, "w") as fh:
        fh.write(head + begin + topology_markdown() + end + tail)


if __name__ == "__main__":  # `python -m treegrpo._topology [docs/CONTRACTS.md]`: print, or rewrite in place
    import sys

    if len(sys.argv) > 1:
        write_into(sys.argv[1])
    else:
        print(topology_markdown(), end="")
