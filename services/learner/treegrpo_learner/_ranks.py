"""The learner's data-parallel ranks as processes: rank 0 lives in the service process, ranks
1..N-1 are spawned workers that replay rank 0's calls.

`RankedTrainer` has PolicyTrainer's surface (`step`, `logprobs`, `state`, `load_state`, `export`,
`load_adapter`). Each call is broadcast as (method, arguments) over a gloo group, then every rank
runs the same method on its own shard, so the collectives inside line up. Results that matter
(metrics, phases, the gathered adapter and optimizer state) are rank 0's. A worker that fails
exits at once, which makes rank 0's next collective raise: the service then reopens the run from
its durable state with fresh ranks. A worker whose parent vanished (SIGKILL) exits by itself.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import SimpleNamespace

import torch
import torch.distributed as dist

from treegrpo_learner._distributed import Ranks
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings

log = logging.getLogger(__name__)
IDLE_TIMEOUT = timedelta(days=30)  # workers wait this long for rank 0's next call


@dataclass(frozen=True)
class RankSpec:
    """What every rank needs to build its shard of the policy (picklable, no pydantic)."""

    model_path: str
    devices: tuple[str, ...]
    trainer: TrainerSettings
    lora: dict = field(default_factory=dict)
    seed: int = 0
    torch_threads: int = 0
    gradient_checkpointing: bool = False
    timeout_s: float = 600.0
    port: int = 0

    @classmethod
    def from_config(cls, cfg, model_path: str) -> RankSpec:
        return cls(
            model_path=model_path,
            devices=tuple(cfg.devices),
            trainer=TrainerSettings.from_config(cfg),
            lora=cfg.lora.model_dump(),
            seed=cfg.seed,
            torch_threads=cfg.torch_threads,
            gradient_checkpointing=cfg.packing.gradient_checkpointing,
            timeout_s=cfg.dist_timeout_s,
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_ranks(rank: int, world: int, device: str, port: int, timeout_s: float) -> Ranks:
    """Join the process group: NCCL for CUDA tensors, gloo for CPU ones; a gloo `control` group for
    objects and barriers inside a call, and a patient `idle` group for waiting between calls."""
    from torch.distributed.device_mesh import init_device_mesh

    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = "cpu:gloo,cuda:nccl" if dev.type == "cuda" else "gloo"
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout_s),
        device_id=dev if dev.type == "cuda" else None,
    )
    mesh = init_device_mesh(dev.type, (world,))
    control = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
    idle = dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT)
    return Ranks(rank, world, dev, mesh, control, idle)


def build_trainer(spec: RankSpec, ranks: Ranks) -> PolicyTrainer:
    """This rank's shard of the policy: the base loaded onto its device, a LoRA adapter, FSDP2."""
    from treegrpo_learner._model import load_base, wrap_lora

    if spec.torch_threads:
        torch.set_num_threads(spec.torch_threads)
    torch.manual_seed(spec.seed)
    base = load_base(spec.model_path, spec.trainer.dtype, str(ranks.device))
    if spec.gradient_checkpointing:
        base.train()  # transformers checkpoints layers only in training mode
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = wrap_lora(base, SimpleNamespace(**spec.lora))
    return PolicyTrainer(model, replace(spec.trainer, device=str(ranks.device)), ranks)


def _watch_parent() -> None:
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)  # rank 0 is gone (killed): nothing left to serve

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def worker_main(rank: int, spec: RankSpec) -> None:
    """Ranks 1..N-1: build the shard, then replay rank 0's calls until told to stop."""
    _watch_parent()
    try:
        ranks = init_ranks(rank, len(spec.devices), spec.devices[rank], spec.port, spec.timeout_s)
        trainer = build_trainer(spec, ranks)
        while True:
            box: list = [None]
            dist.broadcast_object_list(box, src=0, group=ranks.idle)
            name, args = box[0]
            if name == "stop":
                break
            getattr(trainer, name)(*args)
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - any failure ends this rank; rank 0's collectives then raise
        traceback.print_exc()
        os._exit(1)


class RankedTrainer:
    """PolicyTrainer's surface over N ranks (see the module docstring)."""

    def __init__(self, spec: RankSpec):
        import torch.multiprocessing as mp

        spec = replace(spec, port=spec.port or free_port())
        ctx = mp.get_context("spawn")
        self.workers = [
            ctx.Process(target=worker_main, args=(r, spec), daemon=True, name=f"learner-rank{r}")
            for r in range(1, len(spec.devices))
        ]
        for w in self.workers:
            w.start()
        self.healthy = False
        self.ranks = init_ranks(0, len(spec.devices), spec.devices[0], spec.port, spec.timeout_s)
        self.local = build_trainer(spec, self.ranks)
        self.model, self.cfg, self.params = self.local.model, self.local.cfg, self.local.params
        self.healthy = True
        log.info("learner ranks up: %s", ", ".join(spec.devices))

    def _call(self, name: str, *args):
        if not self.healthy:
            raise RuntimeError("the learner's ranks failed earlier; reopen the run")
        try:
            dist.broadcast_object_list([(name, args)], src=0, group=self.ranks.idle)
            return getattr(self.local, name)(*args)
        except BaseException:
            self.healthy = False
            raise

    def step(self, samples):
        return self._call("step", list(samples))

    def logprobs(self, seqs, adapter: bool = True):
        return self._call("logprobs", list(seqs), adapter)

    def state(self) -> dict:
        return self._call("state")

    def load_state(self, state: dict) -> None:
        self._call("load_state", state)

    def export(self):
        return self._call("export")

    def load_adapter(self, adapter_dir) -> None:
        self._call("load_adapter", str(adapter_dir))

    def close(self) -> None:
        """Stop the workers (politely when they are healthy) and leave the process group."""
        if self.healthy:
            try:
                dist.broadcast_object_list([("stop", ())], src=0, group=self.ranks.idle)
            except Exception:  # noqa: BLE001 - they are being stopped either way
                log.warning("could not tell the learner's ranks to stop", exc_info=True)
        self.healthy = False
        for w in self.workers:
            w.join(10)
            if w.is_alive():
                w.kill()
                w.join(5)
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a broken group may refuse; the process still moves on
            log.warning("destroying the process group failed", exc_info=True)
