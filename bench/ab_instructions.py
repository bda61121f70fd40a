"""A/B of two source trees by instructions executed: the same greedy generation on the embedded
Gemma run under valgrind's callgrind, one thread, AVX2 kernels (valgrind has no AVX-512), for
tree A and tree B. Instruction counts do not move with the host's load, so a change's overhead
shows here to a fraction of a percent where wall-clock A/Bs on a shared machine move by 10 %.

Prints, per tree, the instructions of the whole run and of its ds4 extension (``_core``), and B / A.
Both trees run at once (counts do not depend on timing). Needs valgrind.

Usage: python bench/ab_instructions.py --a ../ab_old --b . [--tokens 24]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = """
import sys
import ds4
from ds4 import known_models
m = ds4.Model(str(known_models.model_path("gemma")), threads=1, n_ctx=512)
p = m.tokenize("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg of Mainz")
g = m.session().generate(p, max_tokens=int(sys.argv[1]), stop_at_eog=False)
print(len(p), len(g.tokens))
"""


def totals(out_file: Path) -> tuple[int, int]:
    """(all instructions, those in _core) from a callgrind output file."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", str(out_file)], capture_output=True, text=True,
                          check=True).stdout
    total = core = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in m.group(2):
            total = n
        elif "_core" in m.group(2):
            core += n
    return total, core


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="the tree before (its build in place)")
    ap.add_argument("--b", type=Path, required=True, help="the tree after")
    ap.add_argument("--tokens", type=int, default=24)
    a = ap.parse_args()
    python = os.path.realpath(sys.executable)  # not a shim script: valgrind must start Python itself
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        procs = {}
        for name, tree in (("A", a.a), ("B", a.b)):
            env = dict(os.environ, PYTHONPATH=str(tree.resolve() / "python"), DS4_SIMD="avx2")
            procs[name] = subprocess.Popen(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/{name}.out", python, str(script),
                 str(a.tokens)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        counts = {}
        for name, p in procs.items():
            out, err = p.communicate()
            if p.returncode != 0:
                sys.exit(f"tree {name} failed:\n{err[-2000:]}")
            counts[name] = totals(Path(tmp) / f"{name}.out")
    print(f"A = {a.a}, B = {a.b}; greedy generation of {a.tokens} tokens on Gemma 3 270M, 1 thread, AVX2\n")
    print("| instructions | A | B | B / A |\n|---|---:|---:|---:|")
    for i, what in enumerate(("whole run", "ds4 extension")):
        x, y = counts["A"][i], counts["B"][i]
        print(f"| {what} | {x:,} | {y:,} | {y / x:.4f} |")


if __name__ == "__main__":
    main()
