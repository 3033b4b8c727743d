"""The stack comes up healthy, hardened as compose.yaml says, and the answers stay with the grader."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.stack._stack import SERVICES

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]

# capability bit -> name (linux/capability.h), for reading /proc/<pid>/status masks
CAPS = (
    "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
    "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT "
    "SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE "
    "AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ "
    "PERFMON BPF CHECKPOINT_RESTORE"
).split()


def cap_names(mask_hex: str) -> set[str]:
    mask = int(mask_hex, 16)
    return {name for bit, name in enumerate(CAPS) if mask >> bit & 1}


def proc_status(stack, service: str) -> dict[str, str]:
    """/proc/1/status of the service's container, read from inside it."""
    res = stack.exec(service, "cat", "/proc/1/status")
    assert res.returncode == 0, res.stderr
    return dict(line.split(":\t", 1) for line in res.stdout.splitlines() if ":\t" in line)


def compose_model(stack) -> dict:
    return json.loads(stack.compose("config", "--format", "json").stdout)


def test_every_container_turns_healthy_under_its_own_healthcheck(stack):
    assert {name: stack.health(name) for name in ("nats", *SERVICES)} == dict.fromkeys(
        ("nats", *SERVICES), "healthy"
    )
    print(f"stack up to all-healthy in {stack.up_s:.0f}s ({stack.driver.checks} healthchecks run)")


def test_containers_run_read_only_without_new_privileges_and_with_exactly_the_granted_capabilities(stack):
    model = compose_model(stack)
    for name in SERVICES:
        granted = set(model["services"][name].get("cap_add", []))
        info = stack.inspect(name)
        host = info["HostConfig"]
        assert host["ReadonlyRootfs"] is True, name
        assert any(opt.startswith("no-new-privileges") for opt in host["SecurityOpt"]), (
            name,
            host["SecurityOpt"],
        )
        assert {c.removeprefix("CAP_") for c in info.get("EffectiveCaps") or []} == granted, name
        status = proc_status(stack, name)  # what the kernel says of the service's own process
        assert cap_names(status["CapBnd"]) == granted, name
        assert cap_names(status["CapEff"]) == (granted if name == "executor" else set()), name
        assert status["NoNewPrivs"].strip() == "1", name
        assert status["Seccomp"].strip() == "2", name  # podman's default seccomp filter is on
        uid = status["Uid"].split()[0]
        assert uid == ("0" if name == "executor" else "10001"), (name, uid)
        wrote = stack.exec(name, "touch", "/opt/treegrpo/written-at-run-time")
        assert wrote.returncode != 0 and "Read-only file system" in wrote.stderr, (name, wrote.stderr)


# a search for answer files by name and by content, over every file system the container sees
FIND_ANSWERS = """
import hashlib, json, os, sys
wanted = set(json.loads(sys.argv[1]))
hits = []
for top in ("/",):
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ("/proc", "/sys", "/dev")]
        for name in files:
            path = os.path.join(folder, name)
            if "/tasks/private/" in path:
                hits.append(path)
            try:
                if os.path.islink(path) or os.path.getsize(path) > 50_000_000:
                    continue
                with open(path, "rb") as fh:
                    if hashlib.sha256(fh.read()).hexdigest() in wanted:
                        hits.append(path)
            except OSError:
                continue
print(json.dumps(sorted(set(hits))))
"""


def test_the_executor_container_holds_no_private_answers_the_grader_has(stack):
    private = stack.volume_path("tasks-private")
    digests = {}
    for path in private.rglob("*"):
        if path.is_file():
            digests[str(path.relative_to(private))] = hashlib.sha256(path.read_bytes()).hexdigest()
    assert any(k.endswith("answers.csv") for k in digests), f"the grader generated no answers: {digests}"
    arg = json.dumps(sorted(set(digests.values())))
    found = {
        name: json.loads(stack.exec(name, "python3", "-c", FIND_ANSWERS, arg).stdout or "null")
        for name in ("grader", "executor")
    }
    assert found["grader"], "the search finds the answers where they are (it would find them elsewhere too)"
    assert found["executor"] == [], f"answers visible in the executor container: {found['executor']}"
    mounts = {m.get("Name") for m in stack.inspect("executor")["Mounts"]}
    assert "treegrpo_tasks-private" not in mounts and "treegrpo_tasks-public" in mounts
