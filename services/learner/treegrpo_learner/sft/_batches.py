"""Batches and the loss of one batch: pairs that share a prompt forward it once.

Every draft pair of a task has the same prompt (the task's description and data overview), and
on the demo that prompt is about twice as long as the script it asks for. Packing pairs whole
spends two thirds of the compute re-reading it. A *shared* batch instead forwards the prompt once,
repeats its KV cache over the batch and forwards only the completions against it; gradients flow
back through the repeat into the single prompt pass, so the loss and its gradient equal those of
the packed batch (tests/unit/test_sft_batches.py), at 2.2x the completion tokens per second on
2 CPU cores (benchmarks/sft_step.py). Pairs whose prompt is their own (improve, debug) are packed
by padded length as before.

Only torch (and the model's own classes) are imported here, at call time.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    ids: list[int]
    n_prompt: int  # the first n_prompt tokens carry no loss

    @property
    def n_completion(self) -> int:
        return len(self.ids) - self.n_prompt


def encode(tokenizer, messages: list[dict[str, str]], completion: str) -> Example:
    """Prompt ids exactly as the sampler's hf backend builds them, then the completion and the end token."""
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    return Example(prompt + list(ids) + [tokenizer.eos_token_id], len(prompt))


def make_batches(
    examples: list[Example], batch_tokens: int, rng: random.Random, share_prompts: bool = True
) -> list[list[int]]:
    """Index batches within a token budget (tokens forwarded, padding included), shuffled.

    With `share_prompts`, pairs whose prompt ids are equal form shared batches (cost: the prompt
    once plus the padded completions); the rest are packed whole, similar lengths together."""
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, e in enumerate(examples):
        groups[tuple(e.ids[: e.n_prompt]) if share_prompts else (i,)].append(i)
    batches, loose = [], []
    for members in groups.values():
        if len(members) < 2:
            loose += members
            continue
        rng.shuffle(members)
        batches += _fill(
            members, lambda i: examples[i].n_completion, batch_tokens, examples[members[0]].n_prompt
        )
    loose.sort(key=lambda i: (len(examples[i].ids), rng.random()))
    batches += _fill(loose, lambda i: len(examples[i].ids), batch_tokens, 0)
    rng.shuffle(batches)
    return batches


def _fill(order: list[int], length, budget: int, fixed: int) -> list[list[int]]:
    """Consecutive runs of `order` whose cost fixed + longest * count stays within the budget."""
    out, cur, longest = [], [], 0
    for i in order:
        n = length(i)
        if cur and fixed + max(longest, n) * (len(cur) + 1) > budget:
            out.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        out.append(cur)
    return out


def is_shared(examples: list[Example]) -> bool:
    first = examples[0]
    return len(examples) > 1 and all(
        e.n_prompt == first.n_prompt and e.ids[: e.n_prompt] == first.ids[: first.n_prompt]
        for e in examples[1:]
    )


def batch_loss(model, examples: list[Example], pad_id: int, device: str, share_prompts: bool = True):
    """(token-mean cross-entropy over the completion tokens, number of those tokens)."""
    if share_prompts and is_shared(examples):
        return shared_prompt_loss(model, examples, pad_id, device)
    ids, mask, labels = collate(examples, pad_id, device)
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss, int((labels != -100).sum())


def collate(examples: list[Example], pad_id: int, device: str):
    import torch

    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, e in enumerate(examples):
        n = len(e.ids)
        ids[row, :n] = torch.tensor(e.ids)
        mask[row, :n] = 1
        labels[row, e.n_prompt : n] = ids[row, e.n_prompt : n]
    return ids.to(device), mask.to(device), labels.to(device)


def shared_prompt_loss(model, examples: list[Example], pad_id: int, device: str):
    """The prompt forwarded once with its cache kept, repeated over the batch, then the
    right-padded completions (no mask needed: padding only follows real tokens, and carries no
    label). The prompt's last position predicts every completion's first token."""
    import torch
    import torch.nn.functional as F

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    first = examples[0]
    prompt = torch.tensor([first.ids[: first.n_prompt]], device=device)
    out = base.model(input_ids=prompt, use_cache=True)
    cache = out.past_key_values
    cache.batch_repeat_interleave(len(examples))
    width = max(e.n_completion for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full_like(ids, -100)
    for row, e in enumerate(examples):
        ids[row, : e.n_completion] = labels[row, : e.n_completion] = torch.tensor(e.ids[e.n_prompt :])
    ids, labels = ids.to(device), labels.to(device)
    hidden = base.model(input_ids=ids, past_key_values=cache).last_hidden_state
    head = base.lm_head
    nll = F.cross_entropy(
        head(hidden[:, :-1]).flatten(0, 1).float(), labels[:, 1:].flatten(), reduction="sum"
    )
    first_logits = head(out.last_hidden_state[:, -1]).float().expand(len(examples), -1)
    nll = nll + F.cross_entropy(first_logits, labels[:, 0], reduction="sum")
    n = int((labels != -100).sum())
    return nll / n, n
