"""What a generation does, as ``Session.generate`` and ``Model.generate_batch`` take it: the
prompt's token ids and one ``_core.GenerateOptions`` for the core."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ds4 import _core
from ds4.speculative import Spec

if TYPE_CHECKING:
    from ds4.model import Model

MAX_TOP_LOGPROBS = 20  # alternatives per token at most (OpenAI's bound, csrc/sample/logprobs.h)


def prompt_ids(model: Model, prompt: str | Sequence[int], n_past: int) -> list[int]:
    """Token ids of ``prompt``: text is tokenized with BOS only when the session is empty."""
    if isinstance(prompt, str):
        return model.tokenize(prompt, add_special=n_past == 0) if prompt else []
    return [int(t) for t in prompt]


def generate_options(
    model: Model,
    *,
    max_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    repeat_penalty: float = 1.0,
    repeat_last_n: int = 64,
    presence_penalty: float = 0.0,
    frequency_penalty: float = 0.0,
    logit_bias: dict[int, float] | None = None,
    seed: int | None = None,
    stop: str | Sequence[str] | None = None,
    stop_at_eog: bool = True,
    logprobs: int | None = None,
    spec: Spec | None = None,
) -> _core.GenerateOptions:
    """The core's options for these arguments (see ``Session.generate``), validated."""
    if spec is not None and not isinstance(spec, Spec):
        raise TypeError(f"spec must be a ds4.Spec, got {type(spec).__name__}")
    if logprobs is not None:
        if isinstance(logprobs, bool) or not isinstance(logprobs, int):
            raise TypeError(f"logprobs must be None or an int (alternatives per token), got {type(logprobs).__name__}")
        if not 0 <= logprobs <= MAX_TOP_LOGPROBS:
            raise ValueError(f"logprobs must be in [0, {MAX_TOP_LOGPROBS}] (alternatives per token), got {logprobs}")
    sampling = _core.SamplingParams(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        repeat_penalty=repeat_penalty,
        repeat_last_n=repeat_last_n,
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty,
        logit_bias=logit_bias,
        seed=seed,
    )
    sampling.validate(model.n_vocab)
    opts = _core.GenerateOptions()
    opts.max_tokens = max_tokens
    opts.sampling = sampling
    opts.stop = [stop] if isinstance(stop, str) else list(stop or [])
    opts.stop_at_eog = stop_at_eog
    opts.top_logprobs = -1 if logprobs is None else logprobs
    if spec is not None and not spec.strict:
        opts.spec_types = spec.resolved_types()
        opts.spec_n_max = spec.n_max or 16
        opts.spec_n_min = spec.n_min or 0
        opts.spec_exact = spec.sampling == "exact"
        opts.spec_confidence = spec.confidence or 0.0
        opts.spec_draft_vocab = spec.draft_vocab if spec.draft_vocab is not None else -1
        opts.spec_mtp_draft, opts.spec_mtp_depth = spec.mtp_depths()
        opts.draft = spec.draft(model.threads)
        opts.block_drafter = spec.block_drafter(model)
    return opts
