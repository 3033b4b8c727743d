"""What the runner wires into each service's typed config (NATS, traces, heartbeats, the sampler's
gRPC port for the learner's pushes) and the TOML file each service then reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from treegrpo._topology import SERVICES
from treegrpo.config import RunSpec, ServiceSettings, treegrpo_home
from treegrpo.health import heartbeat_path
from treegrpo.runner._config import RunFile
from treegrpo.runner._toml import dump_toml

S = TypeVar("S", bound=BaseModel)


def under(section: S, **values: Any) -> S:
    """`section` with `values` where the file left them unset: the file's own settings win."""
    return section.model_copy(update={k: v for k, v in values.items() if k not in section.model_fields_set})


def wire(rf: RunFile, spec: RunSpec, url: str, grpc_port: int, run_dir: Path) -> dict[str, ServiceSettings]:
    """Each service's typed config: the run file's section with what the runner wires together
    under it. The file's sections were validated at load and the wiring is the runner's own
    typed values, so nothing is validated twice; each service validates its file again on start."""
    home = treegrpo_home()
    sampler, learner = rf.service("sampler"), rf.service("learner")
    model = sampler.model or spec.model or str(home / "models" / "small")
    # the runner says run.completed once training caught up too, not when rollout ends;
    # unpacked adapters per run: two runs' samplers on one home must not share v1/
    own = {
        "sampler": lambda c: under(
            c.model_copy(update={"grpc": under(c.grpc, port=grpc_port, host="127.0.0.1")}),
            model=model,
            publish_run_completed=False,
            workdir=str(run_dir / "sampler"),
        ),
        "executor": lambda c: c,
        "grader": lambda c: c,
        "learner": lambda c: c.model_copy(
            update={
                "model": learner.model or model,
                "publish": under(c.publish, sampler_endpoints=[f"127.0.0.1:{grpc_port}"]),
            }
        ),
    }
    (run_dir / "traces").mkdir(parents=True, exist_ok=True)
    return {
        n: own[n](_common(rf.service(n), n, rf.runner.stream_replicas, url, spec, run_dir)) for n in SERVICES
    }


def _common(cfg: S, name: str, replicas: int, url: str, spec: RunSpec, run_dir: Path) -> S:
    # one replica count for the whole deployment: the stream the runner makes is what services
    # expect; each service consumes this run's events alone (docs/DEPLOY.md); one span file per
    # service (several processes appending to one file could interleave lines); heartbeats per
    # run, so two runs on one home never read each other's
    wired = {
        "nats": under(cfg.nats, url=url, stream_replicas=replicas),
        "telemetry": under(cfg.telemetry, jsonl_path=str(run_dir / "traces" / f"{name}.jsonl")),
        "health": under(cfg.health, file=str(heartbeat_path(name, root=run_dir))),
    }
    return under(cfg.model_copy(update=wired), run_id=spec.run_id)


def write_configs(configs: dict[str, ServiceSettings], run_dir: Path) -> dict[str, Path]:
    """Each typed config dumped to the TOML file its service reads (what it sets, nothing more:
    defaults and the service's environment resolve in its own process)."""
    paths = {}
    for name, cfg in configs.items():
        p = run_dir / "config" / f"{name}.toml"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(dump_toml(cfg.model_dump(mode="json", exclude_unset=True)))
        paths[name] = p
    return paths
