"""Where each service lives: Python entry points that each service's own distribution declares.

The core never imports a service. A service registers itself in its `pyproject.toml`:

    [project.entry-points."treegrpo.services"]   name -> the Service class (`treegrpo serve NAME`)
    [project.entry-points."treegrpo.configs"]    name -> its config class, importable without the
                                                  service (reading a run file must not load torch)
    [project.entry-points."treegrpo.commands"]   extra CLI commands it brings (`treegrpo sft`)
    [project.entry-points."treegrpo.hooks"]      named functions the runner calls (`demo_policy`)

The names a service may register are the wire contract's (`treegrpo._topology.SERVICES`: they
are producer names, durable consumer names and NATS permission names); `tests/unit/test_plugins.py`
checks the installed entry points against them. A service that is not installed is an error naming
the distribution to install, not an ImportError from deep inside.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points

from treegrpo._topology import SERVICES

GROUP_SERVICES = "treegrpo.services"
GROUP_CONFIGS = "treegrpo.configs"
GROUP_COMMANDS = "treegrpo.commands"
GROUP_HOOKS = "treegrpo.hooks"

__all__ = [
    "SERVICES",
    "NotInstalled",
    "commands",
    "config_class",
    "hook",
    "installed_services",
    "service_class",
]


class NotInstalled(LookupError):
    """A service (or a hook a service provides) is not installed in this environment."""


@cache
def _group(group: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


def _load(group: str, name: str, what: str):
    if name not in SERVICES and group in (GROUP_SERVICES, GROUP_CONFIGS):
        raise NotInstalled(f"unknown service {name!r}; choose one of: {', '.join(SERVICES)}")
    ep = _group(group).get(name)
    if ep is None:
        raise NotInstalled(f"the {name} {what} is not installed: pip install ./services/{name}")
    return ep.load()


def service_class(name: str) -> type:
    """The Service class `name` registered (imports the service and its dependencies)."""
    return _load(GROUP_SERVICES, name, "service")


def config_class(name: str) -> type:
    """The service's config class, importing only its config module (`service_class(name).config_cls`)."""
    return _load(GROUP_CONFIGS, name, "service")


def installed_services() -> tuple[str, ...]:
    """The services installed here, in the contract's order."""
    return tuple(n for n in SERVICES if n in _group(GROUP_SERVICES))


def commands() -> dict[str, EntryPoint]:
    """CLI commands that installed services bring: name -> entry point (a typer app or a function)."""
    return dict(_group(GROUP_COMMANDS))


def hook(name: str, provider: str):
    """A function the service `provider` lends the core by name, e.g. the learner's `demo_policy`."""
    ep = _group(GROUP_HOOKS).get(name)
    if ep is None:
        raise NotInstalled(f"the {provider} service is not installed: pip install ./services/{provider}")
    return ep.load()
