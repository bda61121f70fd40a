"""``ds4.Model``: a loaded GGUF model (weights mmap'd once, shared by every session)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

from ds4 import _core
from ds4.batch import Batch
from ds4.default_model import default_model_path
from ds4.generation import Generation
from ds4.session import Session


class Model:
    """A GGUF model. ``path=None`` loads the embedded default model (Gemma 3 270M Q4_K_M)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        n_ctx: int | None = None,
        kv_type: Literal["f32", "f16"] = "f16",
        precision: Literal["int16", "f32"] = "int16",
        repack: bool = True,
        huge_pages: bool = False,
    ) -> None:
        """``threads``: compute threads (default: one per hardware thread); ``n_ctx``: context
        length of each session (default: the model's trained length; the KV cache grows with
        use); ``kv_type``: KV cache precision, ``"f16"`` (the default, as llama.cpp's: half the
        memory and half the cache reads per token) or ``"f32"`` (exact); ``precision``: the
        activations of the quantised matmuls, ``"int16"`` (quantised to 16 bits per 32 or 256
        values: every matmul of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, K-quant (Q2_K .. Q6_K), IQ4_XS,
        IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0, IQ4_NL and MXFP4 weights)
        or ``"f32"`` (float everywhere). With the
        defaults, Gemma 3 270M's logits are within ~2e-3 (mean) of transformers', >100x closer
        than llama.cpp's; with both set to ``"f32"``, within ~1e-5. Whatever the options, decoding one token
        at a time and verifying blocks of up to 31 tokens give bit-identical logits, which is
        what speculative decoding needs. ``repack``: with int16 activations, rewrite the Q4_0,
        Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4 matrices at load into a layout of the same size whose kernels
        take each 32-value block in one vector lane (their mapped pages are released, so memory
        stays the same; the logits are identical bit for bit); ``False`` reads every weight from
        the mapped file (those formats' kernels then regroup each block
        of the GGUF layout in registers: a decode step's matmuls ~2.5x slower). ``huge_pages`` (Linux, with ``repack``): copy every matrix of 2 MiB
        or more onto transparent huge pages at load (a MoE's expert stacks stay mapped), the same
        logits: a model larger than the CPU's caches decodes faster (Qwen2.5-Coder 1.5B
        +12-19 % on an Intel Xeon) for a longer load, the choice for a long-running
        process; in VMs that hand freed memory back to the host each new
        process pays the memory's first touch again (seconds per GB measured). Without it the
        file's own pages serve, mapped for 2 MiB pages: as fast once the page cache holds the
        file in 2 MiB folios, as a first read (after a reboot, or ds4's own downloads and
        conversions: ds4.page_cache) fills it."""
        if threads is not None and not 1 <= threads <= 1024:
            raise ValueError(f"threads must be in [1, 1024], got {threads}")
        if n_ctx is not None and n_ctx < 1:
            raise ValueError(f"n_ctx must be >= 1, got {n_ctx}")
        self.path = os.fspath(path) if path is not None else str(default_model_path())
        if kv_type not in ("f32", "f16"):
            raise ValueError(f"kv_type must be 'f32' or 'f16', got {kv_type!r}")
        if precision not in ("int16", "f32"):
            raise ValueError(f"precision must be 'int16' or 'f32', got {precision!r}")
        self.threads = threads
        self.kv_type, self.precision = kv_type, precision
        self._m = _core.Model(self.path, threads or 0, n_ctx or 0, kv_type, precision, repack,
                              huge_pages=huge_pages)

    @property
    def arch(self) -> str:
        """``general.architecture`` of the file, e.g. ``"gemma3"``."""
        return self._m.arch

    @property
    def vocab_size(self) -> int:
        """Tokens the tokenizer knows."""
        return self._m.vocab_size

    @property
    def has_mtp(self) -> bool:
        """Whether the file keeps a built-in MTP block to draft with (``Spec(types=["mtp"])``)."""
        return self._m.has_mtp

    @property
    def n_vocab(self) -> int:
        """Width of a logits row (rows of the embedding; may exceed ``vocab_size``)."""
        return self._m.n_vocab

    @property
    def n_ctx(self) -> int:
        """Context length sessions get: the ``n_ctx`` asked for, else the model's trained length."""
        return self._m.n_ctx

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Token ids of ``text``.

        ``add_special`` adds BOS/EOS as the file's ``add_bos_token``/``add_eos_token`` flags say;
        ``parse_special`` turns control and user-defined tokens written in the text (such as
        ``<start_of_turn>``) into their ids instead of tokenizing their characters.
        """
        return self._m.tokenize(text, add_special, parse_special)

    def detokenize(self, ids: list[int]) -> str:
        """Text of ``ids``; special tokens render as their text. Invalid UTF-8 becomes U+FFFD."""
        return self._m.detokenize(list(ids))

    def token_bytes(self, id: int) -> bytes:
        """The bytes token ``id`` stands for (a byte-fallback token's single byte, a special
        token's text; possibly part of a UTF-8 character). ``IndexError`` outside the vocabulary."""
        return self._m.token_bytes(id)

    def session(self) -> Session:
        """A new, empty session on this model (weights shared, its own KV cache)."""
        return Session(self, self._m.session())

    def batch(self, max_rows: int = 512) -> Batch:
        """A :class:`ds4.Batch`: generations that share each forward pass, added and stepped
        incrementally (what a server sits on). ``max_rows``: rows per pass at most (decode rows
        first; prompts fill the rest)."""
        return Batch(self, max_rows)

    def generate_batch(self, prompts: Sequence[str | Sequence[int]], **options: Any) -> list[Generation]:
        """Generate from every prompt at once, each in a new session, one forward pass per step
        for all of them; returns one finished :class:`ds4.Generation` per prompt, in order.

        ``options`` are :meth:`ds4.Session.generate`'s (``spec`` and ``stream`` aside: batched
        rows decode plainly). Each generation's tokens equal those of the same prompt generated
        alone, greedy or sampled with a seed. On a CPU the weights are read once per pass
        whatever its rows, so the sessions share that read (see BENCHMARKS.md for the rates)."""
        b = self.batch()
        gens = [b.add(p, **options) for p in prompts]
        b.run()
        return gens

    def __repr__(self) -> str:
        return f"ds4.Model({self.path!r}, arch={self.arch!r}, vocab_size={self.vocab_size})"
