"""The segment layout of one packed row (see `_packing`): which tokens each segment's attention
reads, where each segment's linear-attention recurrence starts, and the boundaries the kernels take.

Index tensors are built once per micro-batch on its device and cached, since every layer asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Layout:
    """Segments of one packed row: the first `n_roots` are roots, the rest children of `parents`."""

    seg_lens: list[int]
    n_roots: int
    parents: list[int] = field(default_factory=list)  # root index of each child segment
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _tensors: dict = field(default_factory=dict, repr=False)

    @property
    def root_tokens(self) -> int:
        return sum(self.seg_lens[: self.n_roots])

    @property
    def has_children(self) -> bool:
        return len(self.seg_lens) > self.n_roots

    def starts(self) -> list[int]:
        out = [0]
        for n in self.seg_lens:
            out.append(out[-1] + n)
        return out

    def key_lens(self) -> list[int]:
        """Keys per segment: a root's own tokens; a child's root plus its own."""
        return self.seg_lens[: self.n_roots] + [
            self.seg_lens[p] + n for p, n in zip(self.parents, self.seg_lens[self.n_roots :], strict=True)
        ]

    def to(self, device: torch.device | str) -> Layout:
        return Layout(self.seg_lens, self.n_roots, self.parents, torch.device(device))

    def cached(self, name: str, make):
        if name not in self._tensors:
            self._tensors[name] = make()
        return self._tensors[name]

    def tensor(self, name: str, values: list[int]) -> torch.Tensor:
        return self.cached(name, lambda: torch.tensor(values, dtype=torch.long, device=self.device))

    def lens(self, part: str) -> list[int]:
        """Lengths of `all` segments, the `roots`, the `children`, or the `keys` each segment reads."""
        if part == "keys":
            return self.key_lens()
        return {"all": self.seg_lens, "roots": self.seg_lens[: self.n_roots]}.get(
            part, self.seg_lens[self.n_roots :]
        )

    def cu(self, part: str = "all") -> tuple[torch.Tensor, list[int]]:
        """(device int64, host) cumulative lengths of `part` (see `lens`)."""
        host = [0]
        for n in self.lens(part):
            host.append(host[-1] + n)
        return self.tensor(f"cu_{part}", host), host

    def cu32(self, part: str) -> torch.Tensor:
        """The same as int32, what flash attention takes."""
        return self.cached(f"cu32_{part}", lambda: self.cu(part)[0].to(torch.int32))

    def kv_index(self) -> torch.Tensor | None:
        """Row positions whose keys each segment attends to, segment after segment (None: its own)."""
        if not self.has_children:
            return None
        st = self.starts()

        def make() -> list[int]:
            out: list[int] = []
            for j, n in enumerate(self.seg_lens):
                if j >= self.n_roots:
                    p = self.parents[j - self.n_roots]
                    out.extend(range(st[p], st[p + 1]))
                out.extend(range(st[j], st[j] + n))
            return out

        return self.cached("kv", lambda: torch.tensor(make(), dtype=torch.long, device=self.device))

    def conv_index(self, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(gather, keep) for a causal convolution of `width` taps run once over the gathered row:
        every segment is preceded by the `width - 1` inputs its first tokens may see (zeros, index
        T, for a root; the end of its root for a child); `keep` picks each token's output."""
        st = self.starts()
        zero = st[-1]
        pad = width - 1

        def make() -> tuple[list[int], list[int]]:
            gather: list[int] = []
            keep: list[int] = []
            for j, n in enumerate(self.seg_lens):
                before = [zero] * pad
                if j >= self.n_roots:
                    p = self.parents[j - self.n_roots]
                    tail = list(range(max(st[p], st[p + 1] - pad), st[p + 1]))
                    before = [zero] * (pad - len(tail)) + tail
                gather.extend(before)
                keep.extend(range(len(gather) - pad, len(gather) - pad + n))
                gather.extend(range(st[j], st[j] + n))
            return gather, keep

        def tensors():
            g, k = make()
            return (
                torch.tensor(g, dtype=torch.long, device=self.device),
                torch.tensor(k, dtype=torch.long, device=self.device),
            )

        return self.cached(f"conv{width}", tensors)
