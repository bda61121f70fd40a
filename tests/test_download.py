"""``ds4 download`` against a local server that answers as the Hugging Face Hub's file endpoints do
(``HF_ENDPOINT``): a full download, an interrupted transfer resumed from where it stopped (a Range
request), and a file whose bytes do not match the hub's checksum refused and removed."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("huggingface_hub")

DATA = bytes(range(256)) * 2000  # 512 kB


class Hub:
    """The file endpoints of one repository: HEAD / GET of /{repo}/resolve/{rev}/{file}."""

    def __init__(self) -> None:
        self.data, self.etag, self.cut, self.ranges = DATA, hashlib.sha256(DATA).hexdigest(), False, []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self) -> bytes | None:
                if "/resolve/" not in self.path:
                    self.send_response(404)
                    self.end_headers()
                    return None
                start = 0
                if (rng := self.headers.get("Range")) is not None:
                    hub.ranges.append(rng)
                    start = int(rng.split("=")[1].split("-")[0])
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(hub.data) - 1}/{len(hub.data)}")
                self.send_header("ETag", f'"{hub.etag}"')
                self.send_header("X-Repo-Commit", "c" * 40)
                self.send_header("Content-Length", str(len(hub.data) - start))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                return hub.data[start:]

            def do_HEAD(self) -> None:
                self.reply()

            def do_GET(self) -> None:
                body = self.reply()
                if body is None:
                    return
                if hub.cut and self.headers.get("Range") is None:  # the connection drops half way
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    h = Hub()
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))  # read at import
    yield h
    h.server.shutdown()
    h.server.server_close()


def test_full_download_through_the_cli(hub: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.cli import main

    assert main(["download", "org/model-GGUF", "model-q4.gguf"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.read_bytes() == DATA and "models--org--model-GGUF" in str(path)


def test_an_interrupted_transfer_resumes(hub: Hub, tmp_path: Path) -> None:
    from ds4.download import DownloadError, download

    hub.cut = True  # every transfer from the start drops half way: the download gives up
    with pytest.raises(DownloadError, match="failed"):
        download("org/model-GGUF", "model-q4.gguf")
    hub.cut = False
    path = download("org/model-GGUF", "model-q4.gguf")
    assert path.read_bytes() == DATA
    assert hub.ranges and int(hub.ranges[-1].split("=")[1].split("-")[0]) > 0  # resumed, not started over


def test_a_checksum_mismatch_is_refused_and_removed(hub: Hub, tmp_path: Path) -> None:
    from ds4.download import DownloadError, download

    hub.etag = hashlib.sha256(b"other bytes").hexdigest()
    with pytest.raises(DownloadError, match="checksum"):
        download("org/model-GGUF", "model-q4.gguf")
    left = [p for p in (tmp_path / "hf").rglob("*") if p.is_file() and p.stat().st_size > 0 and "model" in str(p)]
    assert not [p for p in left if p.suffix != ".lock" and "refs" not in p.parts]


def test_named_targets_and_unknown_names() -> None:
    from ds4.download import DownloadError, resolve

    assert resolve("ds4f-dspark") == ("antirez/deepseek-v4-gguf", "DeepSeek-V4-Flash-DSpark-support-0731.gguf")
    with pytest.raises(DownloadError, match="unknown target 'nope'"):
        resolve("nope")
