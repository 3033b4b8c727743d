"""A replay whose server stops answering mid-read: the whole history after it resumes, or an error.

The server is paused (SIGSTOP) from inside the replay, after its first events, so the pause falls
mid-read every time; a timer resumes it (SIGCONT) in a thread, outside the paused read.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

from treegrpo import events
from treegrpo.bus import ReplayIncomplete
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

N = 3000


async def _publish_run(bus, run: str) -> None:
    body = "x" * 512  # a few hundred bytes per node, as a short code body is
    for start in range(0, N, 500):
        await bus.publish_many(
            events.make_event(run, "test", pb.NodeSampled(node_id=f"n{i:05d}", task="t", round=1, code=body))
            for i in range(start, start + 500)
        )


def _pause(server, resume_after_s: float) -> threading.Timer:
    os.kill(server.proc.pid, signal.SIGSTOP)
    timer = threading.Timer(resume_after_s, os.kill, (server.proc.pid, signal.SIGCONT))
    timer.start()
    return timer


async def test_replay_paused_mid_read_returns_the_whole_run(nats_server, bus):
    await _publish_run(bus, "big")
    seqs: list[int] = []
    nodes: set[str] = set()
    timer = None
    try:
        async for seq, event in bus.replay("big", kinds=[Kind.NODE_SAMPLED], batch=100):
            seqs.append(seq)
            nodes.add(event.node_sampled.node_id)
            if len(seqs) == 250:
                timer = _pause(nats_server, 7.0)  # longer than one fetch's 5 s wait
    finally:
        if timer is not None:
            timer.join()
        os.kill(nats_server.proc.pid, signal.SIGCONT)
    assert timer is not None
    assert len(seqs) == N
    assert seqs == sorted(set(seqs))
    assert nodes == {f"n{i:05d}" for i in range(N)}


async def test_replay_of_a_server_silent_past_its_patience_raises(nats_server, bus):
    await _publish_run(bus, "big")
    seen = 0
    timer = None
    try:
        with pytest.raises(ReplayIncomplete, match="replay of run big incomplete"):
            async for _seq, _event in bus.replay("big", kinds=[Kind.NODE_SAMPLED], batch=100, patience_s=3):
                seen += 1
                if seen == 250:
                    timer = _pause(nats_server, 12.0)
    finally:
        if timer is not None:
            timer.join()
        os.kill(nats_server.proc.pid, signal.SIGCONT)
    assert 250 <= seen < N
