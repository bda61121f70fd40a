"""Accuracy against transformers: ds4 and llama.cpp on the embedded Gemma 3 270M Q4_K_M (or --model,
any GGUF that transformers loads).

Both engines evaluate the same token ids (ds4's tokenisation, BOS included) at every position
of the texts in tests/model/test_gemma_oracle.py, and are compared with transformers loading
the same GGUF in fp32 with eager attention. The reference is the test suite's cached summary
(argmax, top-2 margin, top-20 ids/values and logits at 512 fixed ids per position, 32 greedy
tokens); if the cache is missing it is built the same way (transformers takes minutes to load).

ds4 runs three ways: with the defaults (precision="int16": int16 activations for every matmul of
the file's weights; an f16 KV cache), with the exact options (precision="f32", kv_type="f32")
and with int16 and an f32 cache (the cost of each half).

Per engine: top-1 agreement with the reference argmax (also counted only where the reference
top-2 margin exceeds 1e-3), mean and max |Δlogit| over the cached ids (top-20 + fixed, as the
test does), and the first index where 64 greedy tokens after the prompt leave transformers'
32 (only the first 32 can be checked). Both engines run on 2 threads with n_ctx 512.

    PYTHONPATH=python python bench/accuracy.py [--model PATH]
"""

import argparse
import importlib.util
from pathlib import Path

import numpy as np

import ds4
from ds4.default_model import default_model_path

N_GEN = 64
MARGIN = 1e-3


def load_oracle():
    path = Path(__file__).resolve().parent.parent / "tests" / "model" / "test_gemma_oracle.py"
    spec = importlib.util.spec_from_file_location("test_gemma_oracle", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reference(oracle, path, model, default):
    """The test suite's cached transformers summary (built the same way if missing: minutes)."""
    return oracle.load_reference(path, model) if default else oracle.load_reference(path, model, path.stem)


class Ds4:
    def __init__(self, model, name):
        self.model = model
        self.name = name

    def logits(self, ids):
        return self.model.session().eval(ids)

    def greedy(self, prompt, n):
        s = self.model.session()
        row = s.eval(prompt)[-1]
        out = []
        for _ in range(n):
            out.append(int(row.argmax()))
            row = s.eval([out[-1]])[-1]
        return out


class LlamaCpp:
    name = "llama.cpp"

    def __init__(self, path):
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_threads=2, logits_all=True, verbose=False)

    def logits(self, ids):
        # eval takes the ids as given: no BOS of its own is added
        self.llm.reset()
        self.llm.eval(ids)
        return self.llm.scores[: len(ids)].copy()

    def greedy(self, prompt, n):
        self.llm.reset()
        self.llm.eval(prompt)
        out = []
        for _ in range(n):
            out.append(int(self.llm.scores[self.llm.n_tokens - 1].argmax()))
            self.llm.eval([out[-1]])
        return out


def first_divergence(a, b):
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), None)


def measure(engine, oracle, model, ref):
    fixed = ref["fixed"]
    n_pos = agree = decided = agree_decided = 0
    diffs = []
    for i, text in enumerate(oracle.TEXTS):
        out = engine.logits(model.tokenize(text))
        hit = out.argmax(1) == ref[f"argmax{i}"]
        clear = ref[f"margin{i}"] > MARGIN
        n_pos += len(hit)
        agree += int(hit.sum())
        decided += int(clear.sum())
        agree_decided += int((hit & clear).sum())
        diffs.append(np.abs(out[:, fixed] - ref[f"fixed{i}"]).ravel())
        top = np.take_along_axis(out, ref[f"top_ids{i}"], axis=1)
        diffs.append(np.abs(top - ref[f"top_vals{i}"]).ravel())
    d = np.concatenate(diffs)
    tokens = engine.greedy(model.tokenize(oracle.PROMPT), N_GEN)
    return {
        "positions": n_pos, "agree": agree, "decided": decided, "agree_decided": agree_decided,
        "mean": float(d.mean()), "max": float(d.max()), "tokens": tokens,
        "diverge": first_divergence(tokens, ref["greedy"].tolist()),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="a GGUF file (default: the embedded model)")
    args = ap.parse_args()
    oracle = load_oracle()
    path = args.model or default_model_path()
    model = ds4.Model(str(path), threads=2, n_ctx=512)
    exact = ds4.Model(str(path), threads=2, n_ctx=512, precision="f32", kv_type="f32")
    int16_f32kv = ds4.Model(str(path), threads=2, n_ctx=512, kv_type="f32")
    ref = reference(oracle, path, model, args.model is None)
    llama = LlamaCpp(path)
    same_tok = all(llama.llm.tokenize(t.encode(), add_bos=True) == model.tokenize(t) for t in oracle.TEXTS)
    print(f"{path.name}; llama.cpp's own tokenisation matches ds4's ids: {same_tok}")
    engines = (Ds4(model, "ds4 (defaults: int16, f16 KV)"), Ds4(exact, "ds4 (exact: f32, f32 KV)"),
               Ds4(int16_f32kv, "ds4 (int16, f32 KV)"), llama)
    results = {e.name: measure(e, oracle, model, ref) for e in engines}

    n_ref = len(ref["greedy"])
    print(f"\n| engine | positions | top-1 agree | top-1 agree, margin > {MARGIN:g} | mean \\|Δ\\| | max \\|Δ\\| "
          f"| greedy divergence (first {n_ref}) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, r in results.items():
        div = "none" if r["diverge"] is None else f"token {r['diverge']}"
        print(f"| {name} | {r['positions']} | {r['agree']}/{r['positions']} ({r['agree'] / r['positions']:.4f}) "
              f"| {r['agree_decided']}/{r['decided']} ({r['agree_decided'] / r['decided']:.4f}) "
              f"| {r['mean']:.2e} | {r['max']:.2e} | {div} |")
    lc = results["llama.cpp"]
    for e in engines[:3]:
        ds = results[e.name]
        print(f"\nllama.cpp mean / {e.name} mean = {lc['mean'] / ds['mean']:.1f}x; "
              f"llama.cpp max / {e.name} max = {lc['max'] / ds['max']:.1f}x")
    ds = results[engines[0].name]
    both = first_divergence(ds["tokens"], lc["tokens"])
    print(f"ds4 vs llama.cpp over {N_GEN} greedy tokens: "
          + ("identical" if both is None else f"first differ at token {both}"))
    for name, r in results.items():
        print(f"{name} greedy: {model.detokenize(r['tokens'])!r}")


if __name__ == "__main__":
    main()
