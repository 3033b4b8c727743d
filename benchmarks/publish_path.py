"""A version's way from the end of the learner's step to the sampler's confirmed load, at the seed
presets' adapter sizes: the learner's archive (`write_archive`, bf16 as both presets publish), the
upload + `policy.published`, the gRPC push into the sampler's `WeightReceiver` (a second process, as
in a run), its checks, its load (hf backend) and `policy.loaded`. That is the learner's
`update_weights` phase less a colocated engine's wake.

One checkout against another in the same run, as interleaved pairs of arm processes; each arm runs
its own code on both sides (learner and sampler) with its own nats-server:

    python benchmarks/publish_path.py --before <old checkout> [--mb 173 467] [--pairs 3] [--repeats 3]
        [--wake-s 0.44] [--checkpoint]

With `--wake-s W` the sampler's engine sleeps between versions and its wake takes W seconds (an
asyncio sleep standing in for a colocated vLLM engine's wake: 0.44 s on the 9B, 1.2 s on the 27B,
measured on GPUs): each arm wakes it where its loader does (at the load, or from the push's first
chunk). With `--checkpoint` the learner also writes its real checkpoint of the version (adapter,
AdamW moments, `_checkpoint.save`) before the archive, as its `RunLearner` does. `step_tail_s` is
the step's time from the end of `update_actor` to the confirmed load (checkpoint, archive, upload,
push, load, wake).

The adapter: LoRA on every linear layer of the tiny local model (`treegrpo model init --size tiny`)
at the rank that gives the archive its size (~35,600 for 173 MB): the bytes, the tensors' count
(28) and the path are a run's; the hf backend's own load of so wide an adapter is not vLLM's
`add_lora` and is reported apart (`load_s`), as is everything else per stage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
RUN = "bench"


def lora_model(model_dir: Path, mb: int):
    """A peft LoRA on the tiny model whose bf16 tensors come to about `mb` MB."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir)
    width = sum(
        m.in_features + m.out_features
        for n, m in base.named_modules()
        if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in TARGETS
    )
    rank = round(mb * 1e6 / 2 / width)
    return get_peft_model(base, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS)), rank


def sleeping_backend(model: Path, wake_s: float):
    """The hf backend asleep before every version, its wake taking `wake_s` (see the docstring)."""
    from treegrpo_sampler.backends._hf import HfBackend

    class Sleeping(HfBackend):
        asleep, last_sleep_seconds, last_wake_seconds = True, 0.0, 0.0

        async def wake(self) -> float:
            if not self.asleep:
                return 0.0
            started = time.perf_counter()
            await asyncio.sleep(wake_s)
            self.asleep, self.last_wake_seconds = False, time.perf_counter() - started
            return self.last_wake_seconds

        async def load_adapter(self, version: int, adapter_dir) -> None:
            await self.wake()  # an engine still asleep wakes inside the load, as vLLM's does
            await super().load_adapter(version, adapter_dir)
            self.asleep = True  # the next round, then the learner's next step: asleep again

    return Sleeping(model)


async def serve(work: Path, model: Path, url: str, wake_s: float) -> None:
    """The sampler's side: a real receiver and loader on the bus; prints its address, serves until killed."""
    from treegrpo.bus import Bus
    from treegrpo_sampler import AdapterLoader, VersionGate, WeightReceiver
    from treegrpo_sampler.backends._hf import HfBackend

    bus = await Bus.connect(url, "sampler/bench", 10)
    backend = sleeping_backend(model, wake_s) if wake_s > 0 else HfBackend(model)
    loader = AdapterLoader(backend, bus, VersionGate(), "s1", work / "adapters", "sampler/bench")
    receiver = WeightReceiver(loader, port=0, spool_dir=work)
    print(await receiver.start(), flush=True)
    await asyncio.Event().wait()


async def publish_one(publisher, model, work: Path, version: int, opt=None) -> dict:
    """One version through this checkout's path; the learner's seconds per stage (with `opt`, its
    checkpoint too)."""
    if not hasattr(publisher, "publish"):  # before 2026-12-07: archive, upload, then push
        from treegrpo_learner._publish import write_archive

        t0 = time.perf_counter()
        tar = write_archive(model, {"state": {"step": version}}, work / f"v{version}.tar", "bfloat16")
        t1 = time.perf_counter()
        metrics = await publisher.deliver(RUN, await publisher.upload(RUN, version, tar, "tiny"))
        return {"archive_s": t1 - t0, "update_weights_s": time.perf_counter() - t0} | metrics
    from treegrpo_learner._archive import write_archive  # the archive carries its sha256

    t0 = time.perf_counter()
    saved_s = await checkpoint(model, opt, work, version) if opt is not None else 0.0  # before the push
    ta = time.perf_counter()
    archive = write_archive(model, {"state": {"step": version}}, work / f"v{version}.tar", "bfloat16")
    t1 = time.perf_counter()
    metrics = await publisher.publish(RUN, version, archive, "tiny")
    end = time.perf_counter()
    saved = {"save_checkpoint_s": saved_s} if opt is not None else {}
    return {"archive_s": t1 - ta, "update_weights_s": end - ta, "step_tail_s": end - t0} | metrics | saved


async def checkpoint(model, opt, work: Path, version: int) -> float:
    """The version's real checkpoint (adapter, AdamW moments, state), as the learner writes it; seconds."""
    from treegrpo_learner import _checkpoint as ckpt

    started = time.perf_counter()
    state = ckpt.LearnerState(run_id=RUN, step=version)
    await asyncio.to_thread(ckpt.save, work / "ckpt", state, model, {"optimizer": opt.state_dict()}, 2)
    return time.perf_counter() - started


def adamw_of(model):
    """An AdamW whose moments are filled (one step on random gradients), as after a learner's step."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-6)
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt.step()
    opt.zero_grad(set_to_none=True)
    return opt


async def arm(work: Path, sizes: list[int], repeats: int, wake_s: float, with_ckpt: bool) -> dict:
    """Every size, `repeats` versions each, through this checkout's learner and sampler."""
    import torch

    import treegrpo_learner
    import treegrpo_sampler
    from treegrpo.bus import Bus
    from treegrpo.embedded import EmbeddedNats
    from treegrpo.events import Kind
    from treegrpo_learner._publish import Publisher

    model_dir = work / "model"
    cmd = [sys.executable, "-m", "treegrpo.cli", "model", "init", str(model_dir), "--size", "tiny"]
    subprocess.run(cmd, check=True, capture_output=True)
    server = EmbeddedNats(work / "nats").start()
    sampler = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(work), str(model_dir), server.url, "--wake-s", str(wake_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = {"learner": str(Path(treegrpo_learner.__file__).parent)}
    out["sampler"] = str(Path(treegrpo_sampler.__file__).parent)
    try:
        address = sampler.stdout.readline().strip()
        bus = await Bus.connect(server.url, "learner/bench", 10)
        await bus.ensure()
        publisher = Publisher(bus, "learner/bench", [address], -1, 600.0, 600.0, 3)
        version = 0
        for mb in sizes:
            model, rank = lora_model(model_dir, mb)
            opt = adamw_of(model) if with_ckpt else None
            rows = []
            for _ in range(repeats):
                version += 1
                with torch.no_grad():  # new values each version, as after a step
                    for n, p in model.named_parameters():
                        if "lora_" in n:
                            p.normal_(0, 0.02)
                row = await publish_one(publisher, model, work, version, opt)
                published = await bus.last_event(RUN, Kind.POLICY_PUBLISHED, str(version))
                loaded = await bus.last_event(RUN, Kind.POLICY_LOADED, (str(version), "s1"))
                row["published_to_loaded_s"] = loaded.envelope.time - published.envelope.time
                row["load_s"] = loaded.policy_loaded.load_seconds
                row |= wake_of(loaded.policy_loaded)
                row["archive_mb"] = published.policy_published.bytes / 1e6
                rows.append(row)
            out[f"{mb}MB"] = {"rank": rank, "runs": rows}
        await bus.close(2)
    finally:
        sampler.kill()
        sampler.wait()
        server.stop()
    return out


def wake_of(fact) -> dict:
    """The engine's wake and the part the load waited for (all of it where the fact has no such field:
    a checkout before the wake started at the first chunk)."""
    known = "wake_waited_seconds" in fact.DESCRIPTOR.fields_by_name and fact.HasField("wake_waited_seconds")
    return {
        "wake_s": fact.wake_seconds,
        "wake_waited_s": fact.wake_waited_seconds if known else fact.wake_seconds,
    }


def run_arm(tree: Path, sizes: list[int], repeats: int, extra: list[str]) -> dict:
    """This script in a fresh process with `tree`'s packages first on the path."""
    paths = [tree, tree / "services" / "learner", tree / "services" / "sampler"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            __file__,
            "--arm",
            tmp,
            "--mb",
            *map(str, sizes),
            "--repeats",
            str(repeats),
            *extra,
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"arm in {tree} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["learner"].startswith(str(tree)):
        raise RuntimeError(f"arm meant for {tree} imported {result['learner']}")
    return result


def summarize(arms: dict[str, list[dict]], sizes: list[int]) -> dict:
    """Per size and arm: the median over every version of every pair, per stage; after/before."""
    keys = ("step_tail_s", "update_weights_s", "archive_s", "save_checkpoint_s", "upload_s", "push_s")
    keys += ("published_to_loaded_s", "load_s", "wake_s", "wake_waited_s")
    out = {}
    for mb in sizes:
        per = {}
        for name, results in arms.items():
            rows = [r for res in results for r in res[f"{mb}MB"]["runs"]]
            per[name] = {k: round(statistics.median(r[k] for r in rows), 3) for k in keys if k in rows[0]}
        for k in ("update_weights_s", "step_tail_s"):
            if k in per["before"] and k in per["after"]:
                per[f"ratio_{k[:-2]}"] = round(per["after"][k] / per["before"][k], 2)
        out[f"{mb}MB"] = per
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="the baseline checkout's root")
    ap.add_argument("--mb", type=int, nargs="+", default=[173, 467])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="")
    ap.add_argument("--wake-s", type=float, default=0.0, help="the engine sleeps; its wake takes this")
    ap.add_argument("--checkpoint", action="store_true", help="the learner checkpoints every version")
    ap.add_argument("--arm", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        asyncio.run(serve(Path(a.serve[0]), Path(a.serve[1]), a.serve[2], a.wake_s))
        return
    if a.arm:
        print(json.dumps(asyncio.run(arm(a.arm, a.mb, a.repeats, a.wake_s, a.checkpoint))))
        return
    here = Path(__file__).resolve().parents[1]
    arms: dict[str, list[dict]] = {"before": [], "after": []}
    extra = ["--wake-s", str(a.wake_s)] + (["--checkpoint"] if a.checkpoint else [])
    for i in range(a.pairs):  # alternate which arm goes first
        order = [("before", a.before.resolve()), ("after", here)]
        for name, tree in order if i % 2 == 0 else order[::-1]:
            arms[name].append(run_arm(tree, a.mb, a.repeats, extra))
            medians = {
                mb: round(
                    statistics.median(r["update_weights_s"] for r in arms[name][-1][f"{mb}MB"]["runs"]), 3
                )
                for mb in a.mb
            }
            print(f"pair {i + 1} {name}: update_weights median by MB {medians}", flush=True)
            if a.json:  # what is done so far, should the rest not finish
                Path(a.json).write_text(json.dumps({"arms": arms}, indent=1))
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}",
        "command": " ".join(sys.argv),
        "summary": summarize(arms, a.mb),
        "arms": arms,
    }
    print(json.dumps(out["summary"], indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
