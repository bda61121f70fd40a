"""The whole engine built for arm64 (NEON kernels: the int16 path, the float path, attention, row
ops) and run under qemu-aarch64 (user mode) on tiny models: the logits of a prompt's last position
within rounding of the x86 build's (their matmuls are bit for bit the same on the int16 path for
the same activations; attention and row ops round in each ISA's own order) and the same greedy
continuation.
tests/model/engine_check.cpp is the driver; every file of csrc/ but the bindings and the x86
kernels is compiled, as an arm64 wheel's build compiles them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny  # noqa: E402

import ds4  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CXX, QEMU = shutil.which("aarch64-linux-gnu-g++"), shutil.which("qemu-aarch64")
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="linux only"),
    pytest.mark.skipif(CXX is None or QEMU is None,
                       reason="needs aarch64-linux-gnu-g++ and qemu-aarch64 (apt-get install g++-aarch64-linux-gnu qemu-user)"),
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("arm64")
    srcs = [p for p in sorted((ROOT / "csrc").rglob("*.cpp"))
            if "bindings" not in p.parts and "x86" not in p.parts and "_avx" not in p.name]
    srcs.append(ROOT / "tests" / "model" / "engine_check.cpp")
    objs: list[str] = []
    jobs: list[subprocess.Popen[str]] = []
    for i, src in enumerate(srcs):
        obj = out / f"{i}_{src.stem}.o"
        objs.append(str(obj))
        jobs.append(subprocess.Popen([str(CXX), "-O1", "-std=c++17", "-DDS4_ARM64=1", f"-I{ROOT / 'csrc'}", "-w",
                                      "-c", str(src), "-o", str(obj)], stderr=subprocess.PIPE, text=True))
        if len(jobs) == 2 or i == len(srcs) - 1:
            for j in jobs:
                assert j.wait() == 0, j.stderr.read() if j.stderr else ""
            jobs = []
    exe = out / "engine_check"
    subprocess.run([str(CXX), "-static", "-pthread", "-o", str(exe)] + objs, check=True)
    return exe


@pytest.mark.parametrize("family,outtype", [("llama", "q8_0"), ("gemma3_text", "q8_0"), ("qwen2", "f32"),
                                            ("qwen2", "bf16"), ("llama", "f16"), ("qwen3_next", "f32")])
def test_arm64_engine_matches_x86(engine: Path, family: str, outtype: str) -> None:
    path = tiny.convert(family, outtype)
    model = ds4.Model(str(path), threads=2, n_ctx=256)
    ids = [int(t) for t in np.random.default_rng(5).integers(3, min(model.n_vocab, 200), 24)]
    want = np.asarray(model.session().eval(ids))[-1]
    r = subprocess.run([str(QEMU), str(engine), str(path), "8", *map(str, ids)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    got = np.array([float(x.split()[1]) for x in lines if x.startswith("logit ")], dtype=np.float32)
    assert got.shape == want.shape
    # ISAs round attention and row ops in their own orders; on the int16 path a rounding difference
    # that moves an activation across an int16 step moves a logit by up to da / 2 * |w| (x86's
    # scalar and AVX-512 builds differ by 7.5e-5 of the largest logit here; on the float path the
    # arm64 build is 3e-7 from x86's on qwen2, 1e-5 on qwen3_next's recurrent layers).
    assert np.abs(got - want).max() <= (3e-4 if outtype == "q8_0" else 1e-4) * np.abs(want).max()
    arm_ids = [int(x) for x in lines[-1].split()[1:]]
    s = model.session()
    logits = np.asarray(s.eval(ids))[-1]
    x86_ids = []
    for _ in range(8):
        x86_ids.append(int(np.argmax(logits)))
        logits = np.asarray(s.eval([x86_ids[-1]]))[-1]
    assert arm_ids == x86_ids
