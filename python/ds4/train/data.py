"""Training data for a drafter, made by the target itself with ds4's engine: for each prompt, the
target's own greedy continuation, and the hidden states at the drafter's target layers of every
position of prompt and continuation (what the drafter conditions on at run time, computed by the
same kernels). Positions from the last prompt token on are where blocks are drafted: their next
tokens are the target's own choices, the labels a drafter must match for its drafts to be
accepted. Each position also keeps the target's final hidden state (after its output norm: what
its output head reads), from which the trainer takes the target's whole next-token distribution
to distil."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ds4.train.prompts import default_prompts


@dataclass
class Sample:
    tokens: np.ndarray    # [T] int32: prompt then continuation
    features: np.ndarray  # [T, k * n_embd] float32: the target's hidden states, layers side by side
    start: int            # the first position whose next token the target chose (the last prompt token)
    teacher: np.ndarray   # [T, n_embd] float32: the final hidden state, the target's logits = output @ it


def read_prompts(path: str | os.PathLike[str] | None) -> list[str]:
    """A jsonl file of {"prompt": ...} (or {"text": ...}, or a bare string) per line; None: the
    shipped default set."""
    if path is None:
        return default_prompts()
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON: {e}") from None
        text = row if isinstance(row, str) else row.get("prompt", row.get("text")) if isinstance(row, dict) else None
        if not isinstance(text, str) or not text:
            raise ValueError(f"{path}:{i}: expected a string or an object with a 'prompt' or 'text' string")
        out.append(text)
    if not out:
        raise ValueError(f"{path}: no prompts")
    return out


def generate(model: object, prompts: Sequence[str | Sequence[int]], layers: Sequence[int], max_new: int, batch: int = 8,
             progress: bool = True, first: int = 0, total: int = 0) -> Iterable[Sample]:
    """One Sample per prompt (text, or token ids taken as they are): the target's greedy continuation
    of up to max_new tokens (``batch``
    prompts decoded together: each gets exactly its solo tokens), then the features. Every other
    prompt is rendered as a user turn through the model's chat template (as chat and the server
    send it), the others continued as plain text (as ``ds4 -p``); `first` is the index of
    prompts[0] in the whole set of `total` (which every other prompt and the progress count in)."""
    from ds4.chat import apply_chat_template
    from ds4.gguf import inspect

    metadata = inspect(model.path)["metadata"]  # type: ignore[attr-defined]

    def ids_of(i: int, prompt: str | Sequence[int]) -> list[int]:
        if not isinstance(prompt, str):
            return [int(t) for t in prompt]
        try:
            chat = apply_chat_template(metadata, [{"role": "user", "content": prompt}]) if i % 2 else None
        except ValueError:  # no template fits the file: plain text only
            chat = None
        return model.tokenize(chat, add_special=False) if chat else model.tokenize(prompt)  # type: ignore[attr-defined]

    t0 = time.time()
    n_tokens = 0
    for at in range(0, len(prompts), batch):
        ids = [ids_of(first + at + i, p) for i, p in enumerate(prompts[at:at + batch])]
        gens = model.generate_batch(ids, max_tokens=max_new, temperature=0.0)  # type: ignore[attr-defined]
        for prompt, g in zip(ids, gens):
            tokens = np.asarray(prompt + g.tokens, dtype=np.int32)
            n_tokens += len(tokens)
            feats, teacher = features(model, tokens, layers)
            yield Sample(tokens, feats, len(prompt) - 1, teacher)
        if progress:
            print(f"\rds4 train-drafter: data {first + min(at + batch, len(prompts))}/{total or len(prompts)} prompts, {n_tokens} tokens, "
                  f"{n_tokens / (time.time() - t0):.0f} tok/s", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)


def features(model: object, tokens: np.ndarray, layers: Sequence[int], chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """([T, k * n_embd] float32 (Gemma's overflow float16): the hidden states at capture indices
    `layers`, side by side; [T, n_embd]: the final one, capture index n_layer)."""
    s = model.session()  # type: ignore[attr-defined]
    last = model._m.n_layer  # type: ignore[attr-defined]
    parts, final = [], []
    for at in range(0, len(tokens), chunk):
        h = s.eval_hidden(tokens[at:at + chunk], [*layers, last])  # [k + 1, n, d]
        parts.append(np.concatenate(list(h[:-1]), axis=-1))
        final.append(h[-1])
    return np.concatenate(parts), np.concatenate(final)


def generate_to(work: Path, model: object, prompts: Sequence[str], layers: Sequence[int], max_new: int,
                shard: int = 64) -> list[Sample]:
    """The samples of `prompts`, generated in shards of `shard` prompts saved under `work` as they
    complete. The work directory's manifest (data.json) names the target, layers and --max-new its
    data was made with, and each shard's prompts (a hash): an interrupted run resumes at the first
    missing shard, a longer prompt set reuses the shards of the prompts it starts with (data grows
    run by run), a shard whose prompts changed is made again, and data of another target, layers
    or --max-new is refused."""
    recipe = {"max_new": max_new, "layers": list(layers), "model": Path(model.path).name,  # type: ignore[attr-defined]
              "teacher": "final hidden state"}
    path = work / "data.json"
    manifest = json.loads(path.read_text()) if path.exists() else {**recipe, "shards": {}}
    if {k: manifest.get(k) for k in recipe} != recipe or not isinstance(manifest.get("shards"), dict):
        raise SystemExit(f"{work} holds data made with another target, --target-layers or --max-new (or an older "
                         f"format): {path.read_text().strip()[:200]}; use another --work-dir or remove it")
    out: list[Sample] = []
    resumed = False  # said once, at the first shard made in this run
    for k, at in enumerate(range(0, len(prompts), shard)):
        name, key = f"data-{k:04d}.npz", _digest(prompts[at:at + shard])
        if manifest["shards"].get(name) == key and (work / name).exists():
            out.extend(load(work / name))
            continue
        if out and not resumed:
            print(f"ds4 train-drafter: data resumed at prompt {at}", file=sys.stderr)
        resumed = True
        samples = list(generate(model, prompts[at:at + shard], layers, max_new, first=at, total=len(prompts)))
        save(samples, work / name)
        out.extend(samples)
        manifest["shards"][name] = key
        _write_json(path, manifest)
    return out


def _digest(prompts: Sequence[str]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(list(prompts)).encode()).hexdigest()[:16]


def _write_json(path: Path, value: object) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


def save(samples: Sequence[Sample], path: Path) -> None:
    """Writes the samples to ``path`` (an .npz), atomically."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, tokens=np.concatenate([s.tokens for s in samples]), features=np.concatenate([s.features for s in samples]),
             teacher=np.concatenate([s.teacher for s in samples]), lengths=np.array([len(s.tokens) for s in samples]),
             starts=np.array([s.start for s in samples]))
    os.replace(tmp, path)


def load(path: Path) -> list[Sample]:
    with np.load(path) as z:  # each z[key] reads its array again: once each
        tokens, feats, teacher, lengths, starts = z["tokens"], z["features"], z["teacher"], z["lengths"], z["starts"]
    out, at = [], 0
    for n, start in zip(lengths, starts):
        out.append(Sample(tokens[at:at + n], feats[at:at + n], int(start), teacher[at:at + n]))
        at += int(n)
    return out
