"""The ds4 command line: inspect's tables and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ds4.cli", *args], capture_output=True, text=True, timeout=120)


def test_inspect_prints_metadata_tensors_and_type_summary(gemma_path):
    r = run_cli("inspect", str(gemma_path))
    assert r.returncode == 0, r.stderr
    assert '"gemma3"' in r.stdout
    assert "token_embd.weight" in r.stdout and "Q8_0" in r.stdout
    summary = r.stdout.split("bits/weight")[1]
    # Gemma 3 270M Q4_K_M holds exactly these five tensor types.
    assert {line.split()[0] for line in summary.strip().splitlines()} == {"Q8_0", "Q5_0", "Q4_K", "Q6_K", "F32", "total"}
    assert "236" in summary.splitlines()[-1]


def test_inspect_json_matches_python_api(gemma_path):
    import ds4

    r = run_cli("inspect", "--json", str(gemma_path))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    api = ds4.inspect(gemma_path)
    assert data["metadata"]["general.architecture"] == "gemma3"
    assert [t["name"] for t in data["tensors"]] == [t["name"] for t in api["tensors"]]
    assert [list(t["shape"]) for t in api["tensors"]] == [t["shape"] for t in data["tensors"]]


def test_inspect_bad_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOTGGUF" * 4)
    r = run_cli("inspect", str(bad))
    assert r.returncode == 1
    assert "bad.gguf" in r.stderr and "magic" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [["tokenize", "--json", "The capital of France is"]])
def test_tokenize_on_default_model(gemma_path, args):
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ids"][0] == 2  # Gemma's <bos>
    assert "".join(out["pieces"][1:]) == "The capital of France is"


def test_prompt_streams_a_continuation_and_reports_speed(gemma_path):
    r = run_cli("-m", str(gemma_path), "-p", "The capital of France is", "-n", "12")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("The capital of France is") and len(r.stdout) > len("The capital of France is") + 10
    assert "prefill" in r.stderr and "decode" in r.stderr and "tok/s" in r.stderr and "load" in r.stderr


def test_prompt_json_is_one_object_matching_the_api(gemma_path):
    import ds4

    r = run_cli("-m", str(gemma_path), "-p", "def fib(n):", "-n", "10", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    g = ds4.Model(str(gemma_path), n_ctx=64).session().generate("def fib(n):", max_tokens=10)
    assert out["tokens"] == g.tokens and out["text"] == g.text
    assert out["stats"]["n_generated"] == 10 and "load_seconds" in out["stats"]


def test_interactive_chat_keeps_history(gemma_path):
    r = subprocess.run([sys.executable, "-m", "ds4.cli", "-m", str(gemma_path), "-n", "5"],
                       input="Hello\nAnd again\n/exit\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("> ") == 3
    reports = [line for line in r.stderr.splitlines() if line.startswith("ds4: prefill")]
    assert len(reports) == 2
    # The second turn reuses the cached conversation: it prefills only the new tokens.
    n_first, n_second = (int(line.split()[2]) for line in reports)
    assert 0 < n_second < n_first + 10


def test_bad_sampling_flag_is_a_clear_error(gemma_path):
    r = run_cli("-m", str(gemma_path), "-p", "x", "--top-p", "0")
    assert r.returncode == 1 and "top_p" in r.stderr and "Traceback" not in r.stderr


def test_huge_pages_flag_reaches_the_model(gemma_path):
    import ds4
    from ds4 import cli_generate
    from huge_pages import anon_huge_kib, thp_available

    args = cli_generate.build_parser().parse_args(["-m", str(gemma_path), "-p", "x", "-t", "2", "-c", "256",
                                                    "--huge-pages"])
    before = anon_huge_kib()
    model, _ = cli_generate._load(args)
    if thp_available():
        assert anon_huge_kib() - before >= 100_000  # most of the embedded Gemma's 178 MB packed head
    tokens = model.session().generate("The capital of France is", max_tokens=6).tokens
    del model
    plain = ds4.Model(str(gemma_path), threads=2, n_ctx=256).session().generate("The capital of France is", max_tokens=6)
    assert tokens == plain.tokens
