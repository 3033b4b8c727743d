"""Which learner settings make the demo policy learn: train arms vs a no-train control, over seeds.

    python benchmarks/learning_sweep.py --config treegrpo/examples/learning-cpu.toml --seeds 0 1 2 \\
        --setting base= --setting lr3e-3=learner.optimizer.lr=3e-3,learner.step.mini_batches=4 \\
        --home /tmp/sweep

Each (setting, seed) is one `treegrpo run CONFIG` (train arm); each seed also gets one control,
`--no-train` with the same config and seed (the control does not depend on learner settings, so
one per seed serves every setting). The demo policy (small model + SFT on the seed corpus) is
built or taken from `<home>/demo` first. Runs already exported under `<home>/runs` are reused, so
an interrupted sweep picks up where it stopped.

What it reports, per (setting, seed): the product's own comparison (`treegrpo report TRAIN
--control CONTROL --json` on the two exports: late-round sample score, train - control, a 95 %
bootstrap interval over sibling groups, the verdict, the round-1 agreement), the failed share of
each arm (the crash rate the estimator leaves), and per round the failed share and mean oriented
metric of valid nodes. Sampling seeds do not depend on the run id, so a seed's control is the
control of every setting at that seed: `treegrpo run --control` would re-run the same arm.

Issue 31's variants (`--variant NAME`, repeatable; `--variant all` = every one) are presets of
`--setting`: baseline, respend (zero-variance groups re-spent, `run.tree.respend`), gspo
(sequence-level ratio), icepop (token mask of the train/inference ratio outside [0.5, 2]). A
setting that changes the run itself (`run.*`, e.g. respend: it grows the tree) gets a control of
its own with the same `run.*` overrides and no training, so search alone is compared with search
alone. A harder setting, where most groups have no variance: `--set sampler.sampling.temperature=1.2`.

    python benchmarks/learning_sweep.py --config treegrpo/examples/learning-cpu.toml --seeds 0 1 2 \
        --variant all --home /tmp/sweep31 --json /tmp/sweep31/rows.json

Per train arm it also reads the run's own report (from the bus, `runs/<id>/report/report.json`):
the learning-signal share, signal groups trained per CPU-hour (the arm's CPU seconds), groups
re-spent and groups the learner skipped for want of signal.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the checkout first, then whatever the caller's path holds (e.g. a worktree's service folders)
PYTHONPATH = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
# before torch loads (the demo policy's SFT runs in this process): OpenMP threads that spin while
# they wait cost 10-40x on shared cores (the Makefile exports the same); seen here: an SFT of 3.5 min
# still unfinished after 36 min beside other work
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


VARIANTS: dict[str, list[str]] = {
    "baseline": [],
    "respend": ["run.tree.respend.enabled=true"],
    "gspo": ['learner.policy_loss.ratio_level="sequence"'],
    "icepop": ["learner.rollout_correction.token_mask_high=2.0"],
}


def demo_policy(home: Path) -> Path:
    from treegrpo_learner.sft import prepare_demo_policy

    return prepare_demo_policy(home / "demo", show_progress=False)


def run_arm(
    config: Path, home: Path, run_id: str, seed: int, model: Path, overrides: list[str], train: bool
) -> tuple[float, float]:
    """One run; returns (wall seconds, CPU seconds of the whole process tree), (0, 0) if its
    export already exists. CPU seconds / cores bounds the wall time on an otherwise idle machine."""
    if (home / "runs" / run_id / "export").is_dir():
        return 0.0, 0.0
    sets = [
        f'run.run_id="{run_id}"',
        f"run.seed={seed}",
        f"learner.seed={seed}",
        "runner.live=false",
        f"runner.report={'true' if train else 'false'}",  # the train arm's own report: signal, re-spends
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        *overrides,
    ]
    cmd = [sys.executable, "-m", "treegrpo.cli", "run", str(config)] + [a for s in sets for a in ("--set", s)]
    if not train:
        cmd.append("--no-train")
    env = {**os.environ, "TREEGRPO_HOME": str(home), "PYTHONPATH": PYTHONPATH, "OMP_WAIT_POLICY": "PASSIVE"}
    t0, cpu0 = time.monotonic(), _children_cpu()
    with open(home / f"{run_id}.log", "w") as log:
        rc = subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"{run_id} failed (rc {rc}); see {home / f'{run_id}.log'}")
    return time.monotonic() - t0, _children_cpu() - cpu0


def _children_cpu() -> float:
    # every process of a run (services, sandboxed scripts) is waited for by its parent, so its
    # time ends up in the run's, then in ours
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def nodes(home: Path, run_id: str) -> list:
    from treegrpo.report import load_from_root

    [data] = load_from_root(home / "runs" / run_id / "export")
    return data.records


def valid(r) -> bool:
    return r.status == "ok" and r.oriented is not None


def per_round(records) -> dict[int, list[float]]:
    """round -> [failed share, mean oriented of valid nodes] over all tasks (a raw view beside the
    report's)."""
    out = {}
    for rnd in sorted({r.round for r in records}):
        rs = [r for r in records if r.round == rnd]
        ok = [r.oriented for r in rs if valid(r)]
        out[rnd] = [round(1 - len(ok) / len(rs), 4), round(statistics.fmean(ok), 4) if ok else None]
    return out


def failed_share(records) -> float:
    """Share of nodes whose final status is not ok: the crash rate a setting leaves behind."""
    return round(sum(not valid(r) for r in records) / len(records), 4)


def learning(home: Path, train_id: str, control_id: str, late_from: int | None) -> dict:
    """The product's comparison: `treegrpo report TRAIN --control CONTROL --json`, from the exports."""
    export = lambda rid: str(home / "runs" / rid / "export" / rid)  # noqa: E731
    cmd = [
        sys.executable,
        "-m",
        "treegrpo.cli",
        "report",
        export(train_id),
        "--control",
        export(control_id),
        "--json",
        "--out",
        str(home / "reports" / train_id),
    ]
    if late_from:
        cmd += ["--late-from", str(late_from)]
    env = {**os.environ, "TREEGRPO_HOME": str(home), "PYTHONPATH": PYTHONPATH}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{") :])["learning"]


def parse_setting(text: str) -> tuple[str, list[str]]:
    name, _, sets = text.partition("=")
    return name, [s for s in sets.split(",") if s]


def run_sets(sets: list[str]) -> list[str]:
    """The overrides that change the run itself (its tree, its tasks): the control must share them."""
    return [s for s in sets if s.startswith("run.")]


def control_id(tag: str, seed: int, sets: list[str]) -> str:
    if not run_sets(sets):
        return f"{tag}ctrl-s{seed}"
    from treegrpo.events import short_hash

    return f"{tag}ctrl-{short_hash(*run_sets(sets), n=6)}-s{seed}"


def run_stats(home: Path, run_id: str, cpu_s: float) -> dict:
    """From the train arm's own report (the bus's facts): signal, re-spends, skips, entropy."""
    path = home / "runs" / run_id / "report" / "report.json"
    if not path.exists():
        return {}
    [m] = [r for r in json.loads(path.read_text())["runs"] if r["run_id"] == run_id]
    sig, rs = m["signal"], m.get("respend", {})
    return {
        "signal_share": sig["share"],
        "signal_groups_trained": sig["trained_with_signal"],
        "signal_groups_per_cpu_hour": round(sig["trained_with_signal"] / (cpu_s / 3600), 1)
        if cpu_s
        else None,
        "respent_groups": rs.get("groups", 0),
        "respent_with_signal": rs.get("with_signal", 0),
        "skipped_no_signal": rs.get("skipped_no_signal", 0),
        "entropy": m.get("entropy", []),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "treegrpo" / "examples" / "learning-cpu.toml")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--setting",
        action="append",
        default=[],
        help="name=key=value,key=value (learner overrides of the train arm)",
    )
    ap.add_argument(
        "--variant", action="append", default=[], choices=[*VARIANTS, "all"], help="issue 31's presets"
    )
    ap.add_argument("--model", type=Path, default=None, help="a policy folder instead of the demo policy")
    ap.add_argument("--dry-run", action="store_true", help="print the arms it would run, run none")
    ap.add_argument(
        "--set", dest="common", action="append", default=[], help="override for every arm (tree shape, tasks)"
    )
    ap.add_argument("--tag", default="", help="prefix of run ids (different tree shapes need different tags)")
    ap.add_argument("--home", type=Path, default=Path("/tmp/learning-sweep"))
    ap.add_argument("--late-from", type=int, default=None, help="first late round (default: the report's)")
    ap.add_argument("--json", type=Path, default=None, help="write the table here too")
    args = ap.parse_args()
    variants = list(VARIANTS) if "all" in args.variant else args.variant
    settings = [parse_setting(s) for s in args.setting] + [(v, VARIANTS[v]) for v in variants]
    settings = settings or [("base", [])]
    if args.dry_run:
        for seed in args.seeds:
            for name, sets in settings:
                print(f"seed {seed}: {args.tag}{name}-s{seed} {sets} vs {control_id(args.tag, seed, sets)}")
        return
    args.home.mkdir(parents=True, exist_ok=True)
    model = args.model or demo_policy(args.home)
    rows = []
    for seed in args.seeds:
        for name, sets in settings:
            ctrl_id = control_id(args.tag, seed, sets)
            ctrl_sets = args.common + run_sets(sets)
            ctrl_s, ctrl_cpu = run_arm(args.config, args.home, ctrl_id, seed, model, ctrl_sets, train=False)
            control = nodes(args.home, ctrl_id)
            run_id = f"{args.tag}{name}-s{seed}"
            wall, cpu = run_arm(args.config, args.home, run_id, seed, model, args.common + sets, train=True)
            train = nodes(args.home, run_id)
            lr = learning(args.home, run_id, ctrl_id, args.late_from)
            pooled = lr["pooled"]
            row = {
                "setting": name,
                "seed": seed,
                "verdict": lr["verdict"],
                "difference": pooled["difference"],
                "ci95": pooled["ci95"],
                "round1": lr["round1"],
                "tasks": {t: [v["difference"], v["ci95"]] for t, v in lr["tasks"].items()},
                "train_s": round(wall),
                "control_s": round(ctrl_s),
                "train_cpu_s": round(cpu),
                "control_cpu_s": round(ctrl_cpu),
                "failed_train": failed_share(train),
                "failed_control": failed_share(control),
                "train_rounds": per_round(train),
                "control_rounds": per_round(control),
                **run_stats(args.home, run_id, cpu),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def summary(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        "setting",
        "seed",
        "verdict",
        "train - control",
        "ci95",
        "failed train / control",
        "wall s (train / ctrl)",
        "signal share",
        "signal groups / CPU-h",
        "re-spent / skipped",
    )
    for r in rows:
        table.add_row(
            r["setting"],
            str(r["seed"]),
            r["verdict"],
            f"{r['difference']:+.3f}",
            "[{:+.3f}, {:+.3f}]".format(*r["ci95"]),
            f"{r['failed_train']:.1%} / {r['failed_control']:.1%}",
            f"{r['train_s']} / {r['control_s']}",
            "–" if r.get("signal_share") is None else f"{r['signal_share']:.1%}",
            str(r.get("signal_groups_per_cpu_hour", "–")),
            f"{r.get('respent_groups', '–')} / {r.get('skipped_no_signal', '–')}",
        )
    Console().print(table)
    for name in dict.fromkeys(r["setting"] for r in rows):  # per setting over seeds
        diffs = [r["difference"] for r in rows if r["setting"] == name]
        verdicts = [r["verdict"] for r in rows if r["setting"] == name]
        print(f"{name}: mean difference {statistics.fmean(diffs):+.3f} over {len(diffs)} seed(s); {verdicts}")


if __name__ == "__main__":
    main()
