"""``ds4.Spec``: how ``Session.generate`` speculates (drafts tokens and verifies them in one pass)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ds4.model import Model

# llama.cpp's spellings of the same proposers
ALIASES = {"draft-simple": "draft", "draft-mtp": "mtp", "draft-dflash": "dflash", "draft-dspark": "dspark"}
AVAILABLE = ("ngram-simple", "ngram-mod", "draft", "mtp", "dflash", "dspark")
PLANNED: tuple[str, ...] = ()
BLOCK = ("dflash", "dspark")  # the block drafters, which draft with a support file (mtp_model)
DEPTH_ENV = "DS4_QWEN4_MTP_DEPTH"  # the seeds' variable fixing the MTP depth (0: adaptive)
_draft_models: dict[tuple[str, int | None], Any] = {}


@dataclass(frozen=True)
class Spec:
    """Speculative decoding settings for :meth:`ds4.Session.generate`.

    ``types`` are proposers chained in order; at each step the first one with a draft proposes
    it: ``"ngram-simple"`` (prompt lookup: the most recent earlier occurrence of the last 4, 3
    or 2 tokens and what followed them), ``"ngram-mod"`` (llama.cpp's hashed pool of 8-grams
    over the whole session) and ``"draft"`` (``draft_model``: a smaller GGUF with the same
    tokenizer, a path or a loaded :class:`ds4.Model`, drafting in its own session; given a draft
    model, ``"draft"`` is appended to ``types`` unless named there) and ``"mtp"`` (the target's own
    built-in MTP block, in GGUFs of Qwen3-Next / Qwen3.5 that keep it: one token ahead, a second
    chained step engaged while recent drafts are accepted whole and dropped after repeated
    rejections of the deeper token, up to ``mtp_draft`` tokens, 2 by default; ``mtp_depth`` > 0,
    or the environment variable ``DS4_QWEN4_MTP_DEPTH``, fixes the depth instead). ``confidence``
    (0 to 1) ends a model proposer's draft where its most likely next token has a lower probability
    (llama.cpp's ``--draft-p-min``; the seeds' ``--dspark-confidence``). ``draft_vocab``: the draft model
    scores only the first ``draft_vocab`` token ids (BPE vocabularies number tokens in merge
    order, a proxy for frequency: the first 32768 cover ~93-96 % of code and prose), which spares
    most of its output projection, the largest part of a small model's bytes per token; ``None``
    is 32768 for vocabularies over 65536 tokens, ``0`` the whole vocabulary. A draft only
    proposes, so this changes how often it is right, never the output. A scheduler picks
    how many drafted tokens to verify (up to ``n_max``; at least ``n_min`` of a draft, whatever
    it estimates) from the measured cost of a verify pass, the proposer's cost per token and its
    running acceptance, and decodes plainly when drafting does not pay (a draft model that could
    not pay even if every draft were accepted is not used at all). ``strict=True`` turns speculation off (the
    target-only path, as the seeds' ``--quality``).

    Acceptance: at temperature 0 a drafted token is accepted iff it is the target's argmax, so
    the output is exactly plain greedy decoding's (``sampling`` is then irrelevant). At
    temperature > 0, ``sampling="opportunistic"`` (the default, as the seeds') accepts drafted
    tokens that equal the target's greedy token and samples normally from the first one that does
    not: faster, but *not* distribution-preserving (more deterministic than plain sampling).
    ``sampling="exact"`` is Leviathan et al.'s rejection sampling (accept with probability
    p(token) under the sampler's distribution, else draw from p without it): every token is
    distributed exactly as plain sampling's. A draft model (or the MTP block) then samples its drafts
    from its own distribution q under the same settings (penalties aside) and the rule uses q: accept with
    probability min(1, p/q), else draw from max(0, p - q). A ``seed`` then fixes the distribution, not the
    exact tokens: how many tokens the scheduler drafts follows measured timings, and that changes
    which random draws go where.

    ``"dflash"`` and ``"dspark"``: a block drafter, the support GGUF ``mtp_model`` (the seeds'
    ``--mtp-model``): a few layers conditioned on the target's hidden states draft a block of tokens
    in one non-causal pass (docs/drafters.md); DSpark's Markov head conditions each drafted token on
    the one before, and its confidence head ends the draft where the running estimate that the draft
    is accepted falls below ``confidence`` (the seeds' ``--dspark-confidence``); unset, the scheduler
    verifies the prefix its confidences predict to yield the most tokens per second. ``ds4 convert``
    makes a DFlash drafter of z-lab's checkpoints, llama.cpp's ``dflash`` GGUFs load as they are,
    ``ds4 train-drafter`` trains one for any model, and the embedded model ships with a DSpark
    drafter: ``Spec(types=["dspark"])`` on it needs no file. Given ``mtp_model``, its kind is
    appended to ``types`` unless a block drafter is named there. A drafter made for another model
    is refused.
    """

    types: list[str] = field(default_factory=lambda: ["ngram-mod"])
    draft_model: str | os.PathLike[str] | Model | None = None
    mtp_model: str | os.PathLike[str] | None = None
    n_max: int | None = None
    n_min: int | None = None
    sampling: Literal["opportunistic", "exact"] = "opportunistic"
    confidence: float | None = None
    draft_vocab: int | None = None
    mtp_draft: int | None = None
    mtp_depth: int | None = None
    strict: bool = False

    def resolved_types(self) -> list[str]:
        """The proposer types with aliases resolved; ValueError / NotImplementedError if unusable."""
        if isinstance(self.types, str):
            raise TypeError("Spec.types must be a list of proposer names, e.g. ['ngram-mod']")
        out = []
        types = list(self.types)
        if self.draft_model is not None and not any(ALIASES.get(t, t) == "draft" for t in types):
            types.append("draft")
        if self.mtp_model is not None and not any(ALIASES.get(t, t) in BLOCK for t in types):
            types.append(block_kind(self.mtp_model))
        if not types:
            raise ValueError("Spec.types is empty: name at least one proposer (or use spec=None)")
        for t in types:
            name = ALIASES.get(t, t)
            if name in PLANNED:
                raise NotImplementedError(f"speculative proposer {t!r} is not available in this version of ds4 "
                                          f"(available: {', '.join(AVAILABLE)})")
            if name not in AVAILABLE:
                raise ValueError(f"unknown speculative proposer {t!r} (available: {', '.join(AVAILABLE)})")
            out.append(name)
        if self.n_max is not None and self.n_max < 1:
            raise ValueError(f"Spec.n_max must be >= 1, got {self.n_max}")
        if self.n_min is not None and not 0 <= self.n_min <= (self.n_max or 16):
            raise ValueError(f"Spec.n_min must be in [0, n_max], got {self.n_min}")
        if self.sampling not in ("opportunistic", "exact"):
            raise ValueError(f"Spec.sampling must be 'opportunistic' or 'exact', got {self.sampling!r}")
        if "draft" in out and self.draft_model is None:
            raise ValueError("the 'draft' proposer needs Spec(draft_model=...)")
        if self.confidence is not None and not 0.0 <= self.confidence < 1.0:
            raise ValueError(f"Spec.confidence must be in [0, 1), got {self.confidence}")
        if self.draft_vocab is not None and self.draft_vocab < 0:
            raise ValueError(f"Spec.draft_vocab must be >= 0 (0: the whole vocabulary), got {self.draft_vocab}")
        if self.confidence is not None and not {"draft", "mtp", *BLOCK} & set(out):
            raise ValueError("Spec.confidence cuts a model proposer's drafts: it needs the 'draft', 'mtp' or a block "
                             "drafter's proposer")
        self.mtp_depths()
        if len(set(BLOCK) & set(out)) > 1:
            raise ValueError("one block drafter at a time: name 'dflash' or 'dspark', as its file is")
        if "mtp" in out and set(BLOCK) & set(out):
            raise ValueError("a block drafter replaces the built-in MTP block for a run: the two are not stacked")
        return out

    def mtp_depths(self) -> tuple[int, int]:
        """(most tokens, fixed depth or 0) of the MTP proposer's drafts; ValueError if invalid."""
        most = 2 if self.mtp_draft is None else self.mtp_draft
        if most < 1:
            raise ValueError(f"Spec.mtp_draft must be >= 1, got {most}")
        fixed = self.mtp_depth
        if fixed is None:
            env = os.environ.get(DEPTH_ENV, "0").strip() or "0"
            if not env.isdigit():
                raise ValueError(f"{DEPTH_ENV} must be 0 (adaptive) or a depth >= 1, got {env!r}")
            fixed = int(env)
        if fixed < 0:
            raise ValueError(f"Spec.mtp_depth must be >= 1 (0 or None: adaptive), got {fixed}")
        return max(most, fixed), fixed

    def draft(self, threads: int | None) -> Any:
        """The draft model's core object (loaded once per path and thread count), or None.

        Loaded from a path, its weights are repacked only before its first forward pass: a draft
        model the scheduler never picks costs only its mapping."""
        from ds4 import _core

        if self.draft_model is None:
            return None
        if not isinstance(self.draft_model, (str, os.PathLike)):
            return self.draft_model._m  # a loaded ds4.Model
        key = (os.fspath(self.draft_model), threads)
        if key not in _draft_models:
            _draft_models[key] = _core.Model(key[0], threads or 0, defer_pack=True)
        return _draft_models[key]

    def block_drafter(self, model: Model) -> Any:
        """The block drafter's core object for ``model`` (loaded once per model and path): the file
        ``mtp_model``, or the one shipped for the model; None when no block drafter is named."""
        from ds4 import _core
        from ds4.drafters import shipped_for

        if not set(BLOCK) & set(self.resolved_types()):
            return None
        if self.mtp_model is None:
            found = shipped_for(model)
            if found is None:
                raise ValueError(f"no block drafter ships for {model.path}: give Spec(mtp_model=PATH) "
                                 "(ds4 train-drafter trains one)")
        path = os.fspath(self.mtp_model if self.mtp_model is not None else found)
        cache = model.__dict__.setdefault("_block_drafters", {})  # lives as long as the model
        if path not in cache:
            cache[path] = _core.BlockDrafter(path, model._m)
        return cache[path]


def block_kind(path: str | os.PathLike[str]) -> str:
    """"dspark" for a drafter file with a Markov head, else "dflash"."""
    p = os.fspath(path)
    return _block_kind(p, os.stat(p).st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _block_kind(path: str, mtime: int) -> str:
    from ds4.gguf import inspect

    tensors = {t["name"] for t in inspect(path)["tensors"]}
    return "dspark" if "markov_w1.weight" in tensors else "dflash"
