"""SIMD dot / dequant kernels against the scalar reference, per format and per ISA.

The bound is the one derived in csrc/quant/x86/simd.h (and arm/float_neon.cpp), computed per case:
    |dot_isa - dot_ref| <= gamma_h * sum_i |w_i x_i| + u * |dot_ref|,   h = n / 8 + 16,
with w_i the reference's dequantised weights and u = 2^-24.  The SIMD dequantisers must be
bit-identical to the reference.  AVX-512 kernels are also checked on CPUs without AVX-512, through
tests/quant/simd_check.cpp built against SIMDe's emulation of the intrinsics.
"""

import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import ds4
from ds4 import _core

gq = pytest.importorskip("gguf.quants")
from gguf import GGMLQuantizationType as GT  # noqa: E402
import qdata  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
U = 2.0**-24

# Formats with SIMD dot kernels: AVX2 and AVX-512 cover all of these; NEON covers F32, F16, Q4_0,
# Q8_0 and Q4_K (the rest fall back to the reference there and pass trivially).
SIMD_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
SIMD_DEQUANT_TYPES = ["Q5_0", "Q8_0", "Q4_K", "Q6_K"]
# (bytes per block, byte offsets of its f16 scale fields: qdata's), random bytes elsewhere.
F16_FIELDS = {t: (qdata.block_geometry(t)[1], f) for t, f in {**qdata.F16_FIELDS, "MXFP4": []}.items()}
SUPER_BLOCK_TYPES = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S",
                     "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0"]
BLOCK = dict.fromkeys(SUPER_BLOCK_TYPES, 256)
QUANTIZABLE = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}  # gguf.quants.quantize supports these

SIMD_ISAS = [i for i in _core.simd_available() if i != "scalar"]


def block_size(t):
    return 1 if t in ("F32", "F16", "BF16") else BLOCK.get(t, 32)


def sane_scales(rng, k):
    mag = np.exp2(rng.uniform(-8, 2, k)) * rng.choice([-1.0, 1.0], k)
    return mag.astype(np.float16)


def random_row(t, n, rng, quantized):
    """Weights of type t for n values: quantised random floats, or raw random bytes with sane scales."""
    if t == "F32":
        return (rng.standard_normal(n) * np.exp2(rng.uniform(-8, 2, n))).astype(np.float32).tobytes()
    if t == "F16":
        return rng.standard_normal(n).astype(np.float16).tobytes()
    if t == "BF16":
        return gq.quantize(rng.standard_normal(n).astype(np.float32), GT.BF16).tobytes()
    if quantized and t in QUANTIZABLE:
        return gq.quantize(rng.standard_normal((1, n)).astype(np.float32), GT[t]).tobytes()
    size, fields = F16_FIELDS[t]
    nb = n // block_size(t)
    raw = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    for off in fields:
        raw[:, off:off + 2] = sane_scales(rng, nb).view(np.uint8).reshape(nb, 2)
    if t in qdata.NIBBLE_D:
        qdata.set_nibble_d(raw, qdata.NIBBLE_D[t], sane_scales(rng, nb))
    if t == "MXFP4":  # the E8M0 exponent: scales 2^-8 .. 2^2
        raw[:, 0] = rng.integers(120, 131, nb)
    return raw.tobytes()


def check_dot(t, isa, data, x):
    n = x.size
    ref = _core.dot(t, data, x, isa="scalar")
    got = _core.dot(t, data, x, isa=isa)
    w = _core.dequantize_raw(t, data, n, isa="scalar")
    abs_sum = float(np.sum(np.abs(w.astype(np.float64) * x.astype(np.float64))))
    h = n / 8 + 16
    bound = h * U / (1 - h * U) * abs_sum + U * abs(ref) + 1e-30
    err = abs(float(got) - float(ref))
    assert err <= bound, f"{t} {isa} n={n}: ref={ref!r} got={got!r} err={err:.3g} bound={bound:.3g}"
    return err / bound


def lengths(t):
    bs = block_size(t)
    if bs == 1:
        return [1, 7, 8, 31, 32, 100, 1000, 4099]
    return [bs * k for k in (1, 2, 3, 5, 64)]


@pytest.mark.skipif(not SIMD_ISAS, reason="no SIMD ISA on this CPU / build")
@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", SIMD_TYPES)
def test_dot_matches_reference(t, isa):
    rng = np.random.default_rng(zlib.crc32(f"{t}/{isa}".encode()))
    for n in lengths(t):
        for quantized in (True, False):
            for scale in (1.0, 1e-3, 1e4):
                data = random_row(t, n, rng, quantized)
                x = (rng.standard_normal(n) * scale).astype(np.float32)
                check_dot(t, isa, data, x)


@pytest.mark.skipif(not SIMD_ISAS, reason="no SIMD ISA on this CPU / build")
@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", SIMD_TYPES)
def test_dot_cancellation(t, isa):
    """Second half of the row repeats the first against -x: the exact dot is 0 while sum |w x| is
    large, so only the absolute part of the bound can hold; activations span 1e-6 .. 1e6."""
    rng = np.random.default_rng(7)
    bs = block_size(t)
    half = bs * (16 if bs > 1 else 256)
    data = random_row(t, half, rng, quantized=False)
    x1 = (rng.standard_normal(half) * np.exp2(rng.uniform(-20, 20, half))).astype(np.float32)
    data2, x = data + data, np.concatenate([x1, -x1])
    check_dot(t, isa, data2, x)


@pytest.mark.skipif(not SIMD_ISAS, reason="no SIMD ISA on this CPU / build")
@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", SIMD_DEQUANT_TYPES)
def test_dequant_bit_exact(t, isa):
    rng = np.random.default_rng(3)
    n = block_size(t) * 37
    data = random_row(t, n, rng, quantized=False)
    ref = _core.dequantize_raw(t, data, n, isa="scalar")
    got = _core.dequantize_raw(t, data, n, isa=isa)
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


@pytest.mark.skipif(not SIMD_ISAS, reason="no SIMD ISA on this CPU / build")
@pytest.mark.parametrize("t", ["Q8_0", "Q4_K", "Q6_K", "F16"])
def test_dot_rows_match_dot(t):
    rng = np.random.default_rng(11)
    n, rows = block_size(t) * 8 if block_size(t) > 1 else 300, 5
    data = b"".join(random_row(t, n, rng, quantized=False) for _ in range(rows))
    x = rng.standard_normal(n).astype(np.float32)
    row = len(data) // rows
    for isa in SIMD_ISAS:
        y = _core.dot_rows(t, data, rows, x, isa=isa)
        for r in range(rows):
            assert y[r] == _core.dot(t, data[r * row:(r + 1) * row], x, isa=isa)


def _python_with_env(env_extra, code):
    env = dict(os.environ, **env_extra)
    # the ds4 this test imported (installed, or the source tree in a dev build)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(ds4.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_env_forces_scalar():
    """DS4_SIMD=scalar selects the reference path (test_simd.py covers every ISA and the errors)."""
    r = _python_with_env({"DS4_SIMD": "scalar"}, "from ds4 import _core; print(_core.simd_active())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "scalar"


# ---- the C++ checker: native AVX2, and AVX-512 through SIMDe emulation -----------------------

CHECK_SOURCES = ["kernels.cpp", "kernels_ref.cpp", "kernels_ref_k.cpp", "kernels_ref_iq.cpp", "iq_tables.cpp",
                 "types.cpp", "int16_ref.cpp", "packed.cpp", "x86/float_avx2.cpp", "x86/float_kquants_avx2.cpp",
                 "x86/float_gemm_avx2.cpp", "x86/int16_gemm_avx2.cpp", "x86/int16_blocks_avx2.cpp",
                 "x86/int16_rows_avx2.cpp"]
AVX512_SOURCES = ["x86/float_avx512.cpp", "x86/float_kquants_avx512.cpp", "x86/float_gemm_avx512.cpp",
                  "x86/int16_gemm_avx512.cpp", "x86/int16_blocks_avx512.cpp", "x86/int16_rows_avx512.cpp",
                  "x86/int16_quantize_avx512.cpp"]
AVXVNNI_SOURCES = ["x86/int16_gemm_avxvnni.cpp", "x86/int16_blocks_avxvnni.cpp", "x86/int16_rows_avxvnni.cpp"]
ARM_SOURCES = [s for s in CHECK_SOURCES if "x86/" not in s] + ["arm/float_neon.cpp", "arm/int16_neon.cpp"]
ARM_BACKEND_SOURCES = ["attn.cpp", "attn_neon.cpp", "vmath.cpp", "vmath_neon.cpp"]
AVX2_FLAGS = ["-mavx2", "-mfma", "-mf16c", "-mbmi2"]


def _check_compiled(job: subprocess.Popen) -> None:
    """A compile's end, its errors read while it runs (a full stderr pipe would block it, and a
    wait() on it, forever)."""
    _, err = job.communicate()
    assert job.returncode == 0, err


def _build_checker(tmp_path, emulate_avx512):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    common = [cxx, "-O2", "-std=c++17", "-DDS4_X86=1", f"-I{ROOT / 'csrc'}", "-w"]
    jobs, objs = [], []
    q = ROOT / "csrc" / "quant"
    for src in CHECK_SOURCES + AVX512_SOURCES + AVXVNNI_SOURCES + ["../../tests/quant/simd_check.cpp"]:
        flags = list(AVX2_FLAGS) if "avx2" in src else []
        if src in AVX512_SOURCES + AVXVNNI_SOURCES and emulate_avx512:
            flags = [f"-I{ROOT / 'tests' / 'quant' / 'simde_shim'}"]
        elif src in AVX512_SOURCES:
            flags = AVX2_FLAGS + ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mavx512bf16"]
        elif src in AVXVNNI_SOURCES:
            flags = AVX2_FLAGS + ["-mavxvnni"]
        obj = tmp_path / (Path(src).stem + ".o")
        objs.append(str(obj))
        jobs.append(subprocess.Popen(common + flags + ["-c", str(q / src), "-o", str(obj)],
                                     stderr=subprocess.PIPE, text=True))
        if len(jobs) >= 2:  # two cores here; keep the build polite
            for j in jobs:
                _check_compiled(j)
            jobs = []
    for j in jobs:
        _check_compiled(j)
    exe = tmp_path / "simd_check"
    subprocess.run([cxx, "-o", str(exe)] + objs, check=True)
    return exe


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86-64 only")
def test_cpp_checker_avx512_emulated(tmp_path):
    if not Path("/usr/include/simde/x86/avx512.h").exists():
        pytest.skip("SIMDe headers not installed (apt-get install libsimde-dev)")
    exe = _build_checker(tmp_path, emulate_avx512=True)
    for isa in ("avx2", "avxvnni", "avx512") if "avx2" in SIMD_ISAS else ("avxvnni", "avx512"):
        r = subprocess.run([str(exe), isa, "99"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="linux only")
def test_cpp_checker_neon_under_qemu(tmp_path):
    """The NEON kernels, cross-compiled for arm64 and run under qemu-aarch64 (user mode): the quant
    tables (simd_check.cpp: the float path within its bound, the int16 path bit for bit) and the
    backend's row ops and attention (tests/backend/neon_check.cpp)."""
    cxx, qemu = shutil.which("aarch64-linux-gnu-g++"), shutil.which("qemu-aarch64")
    if cxx is None or qemu is None:
        pytest.skip("needs aarch64-linux-gnu-g++ and qemu-aarch64 (apt-get install g++-aarch64-linux-gnu qemu-user)")
    q = ROOT / "csrc" / "quant"
    checks = [ROOT / "tests" / "quant" / "simd_check.cpp", ROOT / "tests" / "backend" / "neon_check.cpp"]
    srcs = [q / s for s in ARM_SOURCES] + [ROOT / "csrc" / "backend" / "cpu" / s for s in ARM_BACKEND_SOURCES] + checks
    objs = []
    for i in range(0, len(srcs), 2):
        jobs = []
        for src in srcs[i:i + 2]:
            obj = tmp_path / (src.stem + ".o")
            objs.append(obj)
            jobs.append(subprocess.Popen([cxx, "-O2", "-std=c++17", "-DDS4_ARM64=1", f"-I{ROOT / 'csrc'}", "-w",
                                          "-c", str(src), "-o", str(obj)], stderr=subprocess.PIPE, text=True))
        for j in jobs:
            _check_compiled(j)
    mains = {tmp_path / (c.stem + ".o") for c in checks}
    common = [str(o) for o in objs if o not in mains]
    for check, args in ((checks[0], ["neon", "99"]), (checks[1], ["99"])):
        exe = tmp_path / f"{check.stem}_arm64"
        subprocess.run([cxx, "-static", "-o", str(exe), str(tmp_path / (check.stem + ".o"))] + common, check=True)
        r = subprocess.run([qemu, str(exe)] + args, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert " 0 failures" in r.stdout
