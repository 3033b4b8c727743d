"""The code keeps to the topology table (treegrpo/_topology.py), and docs/CONTRACTS.md states it.

Consumers are checked on the services themselves (their `handlers()`); producers by reading each
producer's package for the event bodies it builds (`pb.NodeGraded(...)`): a service that starts
publishing a kind the table does not give it, or stops publishing one it does, fails here.

Imports a private module: `treegrpo._topology` (what these tests exercise is not on the package's public
surface).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from treegrpo import events
from treegrpo._topology import (
    BEGIN,
    CONSUMER,
    END,
    RUNNER,
    TOPOLOGY,
    consumed_by,
    producers_of,
    topology_markdown,
)
from treegrpo.events import Kind
from treegrpo.plugins import SERVICES, service_class
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
# where each producer's publishing code lives
PACKAGES = {
    RUNNER: "treegrpo/runner",
    CONSUMER: "treegrpo/bus",
    **{name: f"services/{name}/treegrpo_{name}" for name in SERVICES},
}
# bodies built without being published, each with the reason
NOT_PUBLISHED = {
    (
        "services/sampler/treegrpo_sampler/_state.py",
        "PolicyPublished",
    ): "a copy of a consumed fact, kept per version",
}
SKIPPED_FILES: set[str] = set()  # (the test helper that fakes other services facts now lives in tests/)
BODY_KINDS = {pb.Event.DESCRIPTOR.fields_by_name[k.field].message_type.name: k for k in Kind}


def built_bodies(source: str) -> set[str]:
    """Names of the event body messages a module constructs (`pb.X(...)` or `X(...)`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in BODY_KINDS:
                found.add(name)
    return found


def published_kinds(package: str) -> set[Kind]:
    kinds = set()
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in SKIPPED_FILES:
            continue
        kinds |= {BODY_KINDS[b] for b in built_bodies(path.read_text()) if (rel, b) not in NOT_PUBLISHED}
    return kinds


def test_every_proto_body_has_a_kind_and_every_kind_a_route():
    fields = {f.name for f in pb.Event.DESCRIPTOR.oneofs_by_name["body"].fields}
    assert fields == {k.field for k in Kind} == set(events.KINDS)
    assert set(TOPOLOGY) == set(Kind)


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_each_services_handlers_are_the_kinds_the_table_routes_to_it(name):
    svc = object.__new__(service_class(name))  # handlers() only binds methods: no config needed
    handled = svc.handlers()
    assert all(type(k) is Kind for k in handled), f"{name} handles bare strings: {list(handled)}"
    assert set(handled) == consumed_by(name)


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_each_producer_publishes_exactly_the_kinds_the_table_gives_it(name):
    assert published_kinds(PACKAGES[name]) == producers_of(name)


def test_every_producer_and_consumer_in_the_table_is_a_known_one():
    named = set().union(*(r.producers | r.consumers for r in TOPOLOGY.values()))
    assert named <= set(PACKAGES)
    assert {c for r in TOPOLOGY.values() for c in r.consumers} <= set(SERVICES)


def test_the_scan_sees_a_body_built_under_any_import_name():
    src = (
        "from treegrpo.v1 import events_pb2 as v\nfrom treegrpo.v1.events_pb2 import NodeGraded\n"
        "a = v.PolicyLoaded(version=1)\nb = NodeGraded()\nc = v.GroupMember()\n"
    )
    assert built_bodies(src) == {"PolicyLoaded", "NodeGraded"}


def test_contracts_doc_states_the_table_as_generated():
    doc = (ROOT / "docs" / "CONTRACTS.md").read_text()
    begin, end = BEGIN, END
    assert begin in doc and end in doc, "docs/CONTRACTS.md lost its topology markers"
    stated = doc.split(begin, 1)[1].split(end, 1)[0]
    assert stated == topology_markdown(), "regenerate it: python -m treegrpo._topology docs/CONTRACTS.md"
