"""``ds4 download NAME | REPO FILE``: a GGUF from the Hugging Face Hub into its cache (the layout
``huggingface_hub`` reads: blobs by etag, snapshot links), the metadata and the token (``--token``,
``HF_TOKEN`` or the login's) from ``huggingface_hub``; an interrupted transfer resumes where it
stopped (a Range request for the rest of its ``.incomplete`` file), with a progress bar; the file
is checked against the hub's own checksum (the sha256 of an LFS file, the git blob hash of
another) before it takes its name: one that does not match is removed, never left to be loaded.

Named targets: the seeds' DwarfStar files where their public repositories are known, and the
small models this project tests with.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ds4.page_cache import drop_written

_DS4F = "antirez/deepseek-v4-gguf"
_GLM53 = "antirez/glm-5.3-flash-gguf"
NAMED: dict[str, tuple[str, str]] = {
    "ds4f-q2": (_DS4F, "DeepSeek-V4-Flash-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix-0731.gguf"),
    "ds4f-q2-q4": (_DS4F, "DeepSeek-V4-Flash-Layers37-42Q4KExperts-OtherExpertLayersIQ2XXSGateUp-Q2KDown-AProjQ8-"
                          "SExpQ8-OutQ8-chat-v2-imatrix-fixed-0731.gguf"),
    "ds4f-q4": (_DS4F, "DeepSeek-V4-Flash-Q4KExperts-F16HC-F16Compressor-F16Indexer-Q8Attn-Q8Shared-Q8Out-chat-v2-"
                       "imatrix-0731.gguf"),
    "ds4f-dspark": (_DS4F, "DeepSeek-V4-Flash-DSpark-support-0731.gguf"),
    "glm53-q2": (_GLM53, "GLM-5.3-Flash-Q2.gguf"),
    "glm53-q4": (_GLM53, "GLM-5.3-Flash-Q4_K.gguf"),
    "qwen2.5-coder-0.5b": ("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    "qwen2.5-coder-1.5b": ("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
}


class DownloadError(RuntimeError):
    """A download that failed or did not match the hub's checksum (nothing of it is kept)."""


def resolve(name: str, filename: str | None = None) -> tuple[str, str]:
    """(repository, file) of a named target, or of REPO FILE."""
    if filename is not None:
        return name, filename
    if name in NAMED:
        return NAMED[name]
    raise DownloadError(f"unknown target {name!r}: name one of {', '.join(sorted(NAMED))}, or give REPO FILE")


def _digest(path: Path, git_blob: bool) -> str:
    h = hashlib.sha1() if git_blob else hashlib.sha256()
    if git_blob:
        h.update(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _fetch(url: str, part: Path, size: int | None, token: str | None, label: str) -> None:
    """Appends to `part` the bytes of `url` from its current length on (a Range request), with a
    progress bar; the caller renames it once complete."""
    import urllib.request

    from tqdm.auto import tqdm

    have = part.stat().st_size if part.exists() else 0
    if size is not None and have == size:
        return
    if size is not None and have > size:  # not a prefix of this file: start over
        part.unlink()
        have = 0
    headers = {"User-Agent": "ds4-download"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if have:
        headers["Range"] = f"bytes={have}-"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
        if have and r.status != 206:  # the server ignored the range: take the whole file again
            have = 0
        with open(part, "ab" if have else "wb") as f, tqdm(total=size, initial=have, unit="B", unit_scale=True,
                                                          desc=label, disable=None) as bar:
            while chunk := r.read(1 << 20):
                f.write(chunk)
                bar.update(len(chunk))
    if size is not None and part.stat().st_size != size:
        raise OSError(f"the transfer ended at {part.stat().st_size} of {size} bytes")


def download(name: str, filename: str | None = None, *, revision: str | None = None, token: str | None = None,
             local_dir: str | os.PathLike[str] | None = None) -> Path:
    """The local path of the file (in the Hugging Face cache, or `local_dir`), downloaded or resumed
    (the bytes of an interrupted transfer are kept beside it, ``.incomplete``), then verified;
    raises DownloadError."""
    try:
        from huggingface_hub import constants, get_hf_file_metadata, get_token, hf_hub_url
    except ImportError:
        raise DownloadError("ds4 download needs huggingface_hub: pip install huggingface_hub") from None
    repo, file = resolve(name, filename)
    token = token or get_token()
    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT  # as set now, not at import
    url = hf_hub_url(repo, file, revision=revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(url, token=token, endpoint=endpoint)
    except Exception as e:  # noqa: BLE001 - the hub's and its HTTP client's errors alike
        raise DownloadError(f"{file} from {repo}: {type(e).__name__}: {e}") from e
    etag = (meta.etag or "").strip('"')
    if local_dir is not None:
        path = Path(local_dir) / file
        blob = path
    else:  # the hub's cache layout: blobs by etag, a snapshot per commit linking to them
        root = Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}"
        blob = root / "blobs" / (etag or file.replace("/", "_"))
        path = root / "snapshots" / (meta.commit_hash or revision or "main") / file
    if not path.exists():
        part = blob.with_name(blob.name + ".incomplete")
        part.parent.mkdir(parents=True, exist_ok=True)
        try:
            _fetch(url, part, meta.size, token, file)
        except Exception as e:  # noqa: BLE001 - network and disk errors alike; the bytes so far are kept
            raise DownloadError(f"downloading {file} from {repo} failed ({type(e).__name__}: {e}); run it again to "
                                "resume") from e
        bad = _mismatch(part, etag)
        if bad:
            part.unlink()
            raise DownloadError(f"{file} from {repo}: checksum mismatch ({bad}); the file was removed, run the "
                                "download again")
        drop_written(part)
        os.replace(part, blob)
        if path != blob:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(blob, path.parent), path)
            if meta.commit_hash:
                (root / "refs").mkdir(exist_ok=True)
                (root / "refs" / (revision or "main")).write_text(meta.commit_hash)
    return path


def _mismatch(path: Path, etag: str) -> str | None:
    """None when the file is what the hub's etag vouches for (an LFS file's sha256, another's git
    blob hash; nothing to check without one), else what differs."""
    if re.fullmatch(r"[0-9a-f]{64}", etag):
        got = _digest(path, git_blob=False)
    elif re.fullmatch(r"[0-9a-f]{40}", etag):
        got = _digest(path, git_blob=True)
    else:
        return None
    return None if got == etag else f"got {got}, the hub says {etag}"
