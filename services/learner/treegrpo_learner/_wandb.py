"""Optional Weights & Biases logging: off by default, offline unless asked, never fatal."""

from __future__ import annotations

import logging
from pathlib import Path

from treegrpo.config import treegrpo_home
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)


class StepLogger:
    def __init__(self, settings):
        self.settings = settings
        self._run = None

    def start(self, run_id: str, config) -> None:
        if not self.settings.enabled or self._run is not None:
            return
        try:
            import wandb
        except ImportError:
            log.warning("wandb logging asked for but wandb is not installed; continuing without it")
            return
        folder = Path(self.settings.dir or treegrpo_home() / "learner" / run_id / "wandb")
        folder.mkdir(parents=True, exist_ok=True)
        try:
            self._run = wandb.init(
                project=self.settings.project,
                name=run_id,
                id=run_id,
                resume="allow",
                mode=self.settings.mode,
                dir=str(folder),
                config=config.model_dump(mode="json"),
            )
        except Exception as exc:  # an offline-safe logger never stops training
            log.warning("wandb.init failed (%s); continuing without it", exc)

    def log(self, record: pb.LearnerStepped) -> None:
        if self._run is None:
            return
        row = {f"timing/{f.name}": v for f, v in record.phases_s.ListFields()}
        row.update({f"train/{k}": v for k, v in record.metrics.items()})
        row.update(
            {
                "train/groups_with_signal": record.groups_with_signal,
                "train/groups_dropped_stale": record.groups_dropped_stale,
                "timing/total_s": record.total_s,
            }
        )
        try:
            self._run.log(row, step=record.step)
        except Exception as exc:
            log.warning("wandb.log failed: %s", exc)

    def close(self) -> None:
        if self._run is not None:
            try:
                self._run.finish()
            except Exception as exc:
                log.warning("wandb.finish failed: %s", exc)
            self._run = None
