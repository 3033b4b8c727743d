"""Run inside the executor image by test_stack_f_caps.py (not a test module): start the local
sandbox as the compose executor does (root, read-only root) and run one node that leaves a child
behind, then print what happened as one JSON line."""

import asyncio
import json
import os

from treegrpo_executor import ExecutorConfig, Job, Limits, LocalBackend, parse_declaration

CODE = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    time.sleep(600)\n"  # left behind: the node ends only if the sandbox can kill it
    "open('submission/submission.csv', 'w').write('id\\n1\\n')\n"
)


async def main() -> dict:
    os.makedirs("/tmp/public/t", exist_ok=True)
    cfg = ExecutorConfig(
        timeout_s=20,
        public_data_roots=["/tmp/public"],
        local={"workspace_root": "/var/lib/treegrpo/ws", "hidden_paths": []},
        caps={"cpu": 1, "mem_gib": 1},
    )
    backend = LocalBackend(cfg)
    await backend.start()
    try:
        out = await backend.run(
            Job("r", "n", "t", CODE, Limits.for_node(parse_declaration(CODE, cfg.gate), cfg))
        )
        return {"jailed": backend.jailed, "status": out.status, "submission": out.submission is not None}
    except Exception as exc:  # noqa: BLE001 - the sandbox failing to set up is the answer
        return {"jailed": backend.jailed, "error": f"{type(exc).__name__}: {exc}"[-300:]}


print("PROBE " + json.dumps(asyncio.run(main())), flush=True)
