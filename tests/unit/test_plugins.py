"""The service plugins: each service distribution registers itself by entry points, under
the names the wire contract uses, and a service that is not installed is an error naming the
distribution to install.

Imports a private module: `treegrpo._topology` (what these tests exercise is not on the package's public
surface).
"""

from __future__ import annotations

import pytest

from treegrpo import plugins
from treegrpo._topology import SERVICES, TOPOLOGY
from treegrpo.service import Service

pytestmark = pytest.mark.timeout(60)


def test_every_service_of_the_contract_is_registered_and_nothing_else():
    assert plugins.installed_services() == SERVICES
    assert set(plugins._group(plugins.GROUP_SERVICES)) == set(SERVICES)
    assert set(plugins._group(plugins.GROUP_CONFIGS)) == set(SERVICES)
    assert {c for r in TOPOLOGY.values() for c in r.consumers} <= set(SERVICES)


@pytest.mark.parametrize("name", SERVICES)
def test_a_registered_service_is_a_service_with_its_registered_config(name):
    cls = plugins.service_class(name)
    assert issubclass(cls, Service)
    assert plugins.config_class(name) is cls.config_cls


def test_the_learner_brings_its_commands_and_the_demo_hook():
    assert "sft" in plugins.commands()
    assert callable(plugins.hook("demo_policy", provider="learner"))


def test_a_service_not_installed_names_the_distribution_to_install(monkeypatch):
    groups = {g: {} for g in (plugins.GROUP_SERVICES, plugins.GROUP_CONFIGS, plugins.GROUP_HOOKS)}
    monkeypatch.setattr(plugins, "_group", lambda group: groups.get(group, {}))
    with pytest.raises(
        plugins.NotInstalled, match=r"^the learner service is not installed: pip install ./services/learner$"
    ):
        plugins.service_class("learner")
    with pytest.raises(plugins.NotInstalled, match="pip install ./services/learner"):
        plugins.hook("demo_policy", provider="learner")
    assert plugins.installed_services() == ()


def test_an_unknown_service_name_lists_the_known_ones():
    with pytest.raises(
        plugins.NotInstalled, match="unknown service 'samplr'; choose one of: sampler, executor"
    ):
        plugins.service_class("samplr")
