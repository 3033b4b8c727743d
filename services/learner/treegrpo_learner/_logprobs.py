"""Log-probabilities of target tokens straight from hidden states, a chunk of rows at a time.

A 151,936-token vocabulary makes the float32 logits of 16k tokens 9.3 GiB, and autograd would keep
them for backward. `chunked_logprobs` never builds that tensor: forward computes each chunk's
logits, keeps only the log-sum-exp per row, and backward recomputes the chunk's logits to form
the gradient `W^T (onehot(y) - softmax) * g` row block by row block.
"""

from __future__ import annotations

import torch


class _ChunkedLogprob(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int):
        n = hidden.shape[0]
        logp = torch.empty(n, dtype=torch.float32, device=hidden.device)
        entropy = torch.empty(n, dtype=torch.float32, device=hidden.device)
        lse = torch.empty(n, dtype=torch.float32, device=hidden.device)
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            logits = (hidden[s:e] @ weight.t()).float()
            z = torch.logsumexp(logits, dim=-1)
            lse[s:e] = z
            logp[s:e] = logits.gather(1, targets[s:e, None]).squeeze(1) - z
            logq = logits.sub_(z[:, None])  # in place: one [chunk, vocab] float32 tensor, not three
            # entropy = -sum p log p, the product taken in place of p (elementwise: autocast
            # leaves it in float32, where a matmul form would be cast down to bf16)
            entropy[s:e] = -logq.exp().mul_(logq).sum(-1)
            del logits, logq
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.chunk = chunk
        ctx.mark_non_differentiable(entropy)
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp: torch.Tensor, _grad_entropy: torch.Tensor):
        hidden, weight, targets, lse = ctx.saved_tensors
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        n, chunk = hidden.shape[0], ctx.chunk
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            # d logp_y / d logits = onehot(y) - softmax(logits), built in place of the logits
            g = (hidden[s:e] @ weight.t()).float().sub_(lse[s:e, None]).exp_().mul_(-grad_logp[s:e, None])
            g.scatter_add_(1, targets[s:e, None], grad_logp[s:e, None].float())
            g = g.to(hidden.dtype)
            if need_h:
                grad_h[s:e] = g @ weight
            if need_w:
                grad_w += (g.t() @ hidden[s:e]).float()
            del g
        return grad_h, (grad_w.to(weight.dtype) if need_w else None), None, None


def chunked_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int = 2048
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logp[y], entropy) per row of `hidden` [N, H] under the LM head `weight` [V, H]; float32.

    The entropy is a metric and carries no gradient."""
    if hidden.shape[0] == 0:
        z = hidden.new_zeros(0, dtype=torch.float32)
        return z, z
    return _ChunkedLogprob.apply(hidden, weight, targets.long(), max(1, int(chunk)))


def full_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The reference: materialise all logits (tests and the naive benchmark baseline only)."""
    logits = (hidden @ weight.t()).float()
    return torch.log_softmax(logits, -1).gather(1, targets.long()[:, None]).squeeze(1)
