"""A version's way from the end of the learner's step to the sampler's confirmed load, at the seed
presets' adapter sizes: the learner's archive (`write_archive`, bf16 as both presets publish), the
upload + `policy.published`, the gRPC push into the sampler's `WeightReceiver` (a second process, as
in a run), its checks, its load (hf backend) and `policy.loaded`. That is the learner's
`update_weights` phase less a colocated engine's wake.

One checkout against another in the same run, as interleaved pairs of arm processes; each arm runs
its own code on both sides (learner and sampler) with its own nats-server:

    python benchmarks/publish_path.py --before <old checkout> [--mb 173 467] [--pairs 3] [--repeats 3]

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


async def serve(work: Path, model: Path, url: str) -> None:
    """The sampler's side: a real receiver and loader on the bus; prints its address, serves until killed."""
    from treegrpo.bus import Bus
    from treegrpo_sampler import AdapterLoader, VersionGate, WeightReceiver
    from treegrpo_sampler.backends._hf import HfBackend

    bus = await Bus.connect(url, "sampler/bench", 10)
    loader = AdapterLoader(HfBackend(model), bus, VersionGate(), "s1", work / "adapters", "sampler/bench")
    receiver = WeightReceiver(loader, port=0, spool_dir=work)
    print(await receiver.start(), flush=True)
    await asyncio.Event().wait()


async def publish_one(publisher, model, work: Path, version: int) -> dict:
    """One version through this checkout's path; the learner's seconds per stage."""
    if not hasattr(publisher, "publish"):  # before 2026-12-07: archive, upload, then push
        from treegrpo_learner._publish import write_archive

        t0 = time.perf_counter()
        tar = write_archive(model, {"state": {"step": version}}, work / f"v{version}.tar", "bfloat16")
        t1 = time.perf_counter()
        metrics = await publisher.deliver(RUN, await publisher.upload(RUN, version, tar, "tiny"))
        return {"archive_s": t1 - t0, "update_weights_s": time.perf_counter() - t0} | metrics
    from treegrpo_learner._archive import write_archive  # the archive carries its sha256

    t0 = time.perf_counter()
    archive = write_archive(model, {"state": {"step": version}}, work / f"v{version}.tar", "bfloat16")
    t1 = time.perf_counter()
    metrics = await publisher.publish(RUN, version, archive, "tiny")
    return {"archive_s": t1 - t0, "update_weights_s": time.perf_counter() - t0} | metrics


async def arm(work: Path, sizes: list[int], repeats: int) -> dict:
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
        [sys.executable, __file__, "--serve", str(work), str(model_dir), server.url],
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
            rows = []
            for _ in range(repeats):
                version += 1
                with torch.no_grad():  # new values each version, as after a step
                    for n, p in model.named_parameters():
                        if "lora_" in n:
                            p.normal_(0, 0.02)
                row = await publish_one(publisher, model, work, version)
                published = await bus.last_event(RUN, Kind.POLICY_PUBLISHED, str(version))
                loaded = await bus.last_event(RUN, Kind.POLICY_LOADED, (str(version), "s1"))
                row["published_to_loaded_s"] = loaded.envelope.time - published.envelope.time
                row["load_s"] = loaded.policy_loaded.load_seconds
                row["archive_mb"] = published.policy_published.bytes / 1e6
                rows.append(row)
            out[f"{mb}MB"] = {"rank": rank, "runs": rows}
        await bus.close(2)
    finally:
        sampler.kill()
        sampler.wait()
        server.stop()
    return out


def run_arm(tree: Path, sizes: list[int], repeats: int) -> dict:
    """This script in a fresh process with `tree`'s packages first on the path."""
    paths = [tree, tree / "services" / "learner", tree / "services" / "sampler"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--arm", tmp, "--mb", *map(str, sizes), "--repeats", str(repeats)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"arm in {tree} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["learner"].startswith(str(tree)):
        raise RuntimeError(f"arm meant for {tree} imported {result['learner']}")
    return result


def summarize(arms: dict[str, list[dict]], sizes: list[int]) -> dict:
    """Per size and arm: the median over every version of every pair, per stage; after/before."""
    keys = ("update_weights_s", "archive_s", "upload_s", "push_s", "published_to_loaded_s", "load_s")
    out = {}
    for mb in sizes:
        per = {}
        for name, results in arms.items():
            rows = [r for res in results for r in res[f"{mb}MB"]["runs"]]
            per[name] = {k: round(statistics.median(r[k] for r in rows), 3) for k in keys if k in rows[0]}
        per["ratio_update_weights"] = round(
            per["after"]["update_weights_s"] / per["before"]["update_weights_s"], 2
        )
        out[f"{mb}MB"] = per
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="the baseline checkout's root")
    ap.add_argument("--mb", type=int, nargs="+", default=[173, 467])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="")
    ap.add_argument("--arm", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        asyncio.run(serve(Path(a.serve[0]), Path(a.serve[1]), a.serve[2]))
        return
    if a.arm:
        print(json.dumps(asyncio.run(arm(a.arm, a.mb, a.repeats))))
        return
    here = Path(__file__).resolve().parents[1]
    arms: dict[str, list[dict]] = {"before": [], "after": []}
    for i in range(a.pairs):  # alternate which arm goes first
        order = [("before", a.before.resolve()), ("after", here)]
        for name, tree in order if i % 2 == 0 else order[::-1]:
            arms[name].append(run_arm(tree, a.mb, a.repeats))
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
