"""A decode step allocates nothing on the heap once warmed up: the session, the model, the
backend's arena and its thread pool reuse what the first steps sized (issue 16). Counted in a
child process whose every malloc-family call (operator new included) goes through
count_malloc.c (LD_PRELOAD): generations of 8 and 40 tokens run in C++ from start to end, and
the 32 extra decode steps of the longer one may add only the amortised growth of its token list
and text, a few allocations, never one per step."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SHORT, LONG = 8, 40
# Amortised growth of the output (token list, text) over 32 steps: log2-many reallocations.
MAX_EXTRA = 8


def allocations(model_path: str) -> dict[str, int]:
    """Child process: allocations of the extra steps, per generation kind."""
    import numpy as np

    import ds4
    from ds4 import _core
    from ds4.options import generate_options

    count = ctypes.CDLL(None).ds4_test_allocations
    count.restype = ctypes.c_ulong
    m = ds4.Model(model_path)
    prompt = np.asarray(m.tokenize("The quick brown fox jumps over the lazy dog and"), dtype=np.int64)

    def run(n: int, temperature: float) -> int:
        s = m.session()
        opts = generate_options(m, max_tokens=n, temperature=temperature, seed=3, stop_at_eog=False)
        gen = _core.Generator(s._s, m._m, prompt, opts)
        before = count()
        gen.run()
        return int(count() - before)

    out = {}
    for name, temperature in (("greedy", 0.0), ("sampled", 0.8)):
        run(SHORT, temperature)  # warm-up: arena, scratch and pool sized
        out[name] = run(LONG, temperature) - run(SHORT, temperature)
    return out


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the allocation counter")
    lib = tmp_path_factory.mktemp("alloc") / "count_malloc.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(HERE / "count_malloc.c")], check=True)
    return lib


@pytest.mark.parametrize("which", ["gemma", "hybrid"])
def test_decode_steps_allocate_nothing(counter: Path, gemma_path: Path, which: str) -> None:
    """The embedded Gemma, and the tiny Qwen3-Next (recurrent slots, routed experts)."""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("ASan replaces the allocator")
    import tiny

    path = gemma_path if which == "gemma" else tiny.convert("qwen3_next", "q8_0")
    env = dict(os.environ, LD_PRELOAD=str(counter))
    proc = subprocess.run([sys.executable, __file__, str(path)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    extra = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind, n in extra.items():
        assert n <= MAX_EXTRA, f"{kind}: {n} heap allocations in {LONG - SHORT} decode steps"


if __name__ == "__main__":
    print(json.dumps(allocations(sys.argv[1])))
