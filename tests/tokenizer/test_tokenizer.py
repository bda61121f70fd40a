"""ds4's tokenizers against the HF tokenizer transformers builds from the same GGUF.

Every string of the corpus (strings.py, >2,000 per model) must give the same ids with and
without BOS/EOS, with special tokens parsed and not, and decode to what HF decodes.
"""

from __future__ import annotations

import time

import pytest

import strings

CORPUS = strings.corpus()


def _mismatches(pair, add_special, parse_special):
    hf = pair.hf
    hf.encode_special_tokens = not parse_special
    try:
        want = [e.ids for e in hf.encode_batch(CORPUS, add_special_tokens=add_special)]
    finally:
        hf.encode_special_tokens = False
    bad = []
    for s, w in zip(CORPUS, want):
        got = pair.ds4.encode(s, add_special, parse_special)
        if got != w:
            bad.append((s, got, w))
    return bad


def _report(bad, pair):
    lines = [f"{len(bad)}/{len(CORPUS)} strings differ for {pair.name}"]
    for s, got, want in bad[:5]:
        lines.append(f"  {s!r}\n    ds4 {got}\n    hf  {want}")
    return "\n".join(lines)


@pytest.mark.parametrize("add_special", [True, False])
def test_encode_matches_hf(pair, add_special):
    bad = _mismatches(pair, add_special, parse_special=True)
    assert not bad, _report(bad, pair)


def test_encode_without_parsing_specials_matches_hf(pair):
    # HF's split_special_tokens: control tokens written in the text are tokenized as text;
    # user-defined ones still match whole.
    bad = _mismatches(pair, add_special=True, parse_special=False)
    assert not bad, _report(bad, pair)


def test_specials_in_text(pair):
    added = {t.content: i for i, t in pair.hf.get_added_tokens_decoder().items() if t.special}
    chat = [t for t in ("<|im_start|>", "<start_of_turn>") if t in added]
    assert chat, "each model has a chat control token"
    for tok in chat:
        assert pair.ds4.encode(f"x{tok}y", add_special=False)[1] == added[tok]
        assert added[tok] not in pair.ds4.encode(f"x{tok}y", add_special=False, parse_special=False)


def test_decode_matches_hf(pair):
    bad = []
    for s in CORPUS:
        ids = pair.ds4.encode(s, True, True)
        want = pair.hf.decode(ids, skip_special_tokens=False)
        if pair.ds4.decode(ids) != want:
            bad.append((s, pair.ds4.decode(ids), want))
    assert not bad, f"{len(bad)} decodes differ, e.g. {bad[:3]}"


def test_round_trip(pair):
    # Lossless wherever HF's own round trip is.
    lossless = 0
    bad = []
    for s in CORPUS:
        ids = pair.ds4.encode(s, add_special=False)
        if pair.hf.decode(pair.hf.encode(s, add_special_tokens=False).ids, skip_special_tokens=False) != s:
            continue
        lossless += 1
        if pair.ds4.decode(ids) != s:
            bad.append(s)
    assert not bad, f"round trip lost {len(bad)} strings, e.g. {bad[:3]!r}"
    assert lossless > 0.9 * len(CORPUS)


def test_stream_decoder(pair):
    for s in CORPUS[:: max(1, len(CORPUS) // 400)] + [s for s in strings.HARD if "\ufffd" not in s]:
        if "\ufffd" in s:
            continue
        ids = pair.ds4.encode(s, add_special=False)
        dec = pair.ds4.stream_decoder()
        pieces = [dec.push(i) for i in ids]
        tail = dec.flush()
        assert tail == ""
        assert all("\ufffd" not in p for p in pieces), (s, pieces)  # never part of a character
        assert "".join(pieces) == pair.ds4.decode(ids), s


def test_stream_decoder_holds_back_partial_utf8(pair):
    # A character spelled by byte tokens (or split across byte-level tokens) comes out whole.
    ids = pair.ds4.encode("𠀀🧑🏿\u200d💻", add_special=False)
    dec = pair.ds4.stream_decoder()
    out = [dec.push(i) for i in ids]
    assert "".join(out) + dec.flush() == "𠀀🧑🏿\u200d💻"
    assert len(ids) > len([p for p in out if p])  # some ids emitted nothing: held back
    # A cut sequence comes out as one U+FFFD on flush.
    first = ids[0]
    dec = pair.ds4.stream_decoder()
    head = dec.push(first)
    if pair.ds4.token_bytes(first) != "𠀀".encode():
        assert head == "" and dec.flush() == "\ufffd"


def test_ids_out_of_range(pair):
    n = pair.ds4.vocab_size
    assert n == pair.hf.get_vocab_size(with_added_tokens=True)
    with pytest.raises(IndexError):
        pair.ds4.token_bytes(n)
    with pytest.raises(IndexError):
        pair.ds4.decode([0, -1])


def test_model_binding_uses_same_tokenizer(pair):
    import ds4

    m = ds4.Model(str(pair.path))
    s = CORPUS[len(CORPUS) // 2]
    assert m.tokenize(s) == pair.ds4.encode(s)
    assert m.tokenize(s, add_special=False, parse_special=False) == pair.ds4.encode(s, False, False)
    assert m.detokenize(m.tokenize(s, add_special=False)) == pair.ds4.decode(pair.ds4.encode(s, False))
    assert m.vocab_size == pair.ds4.vocab_size


def test_long_text_is_fast_and_exact(pair):
    text = strings.long_text()
    t0 = time.perf_counter()
    ids = pair.ds4.encode(text, add_special=False)
    dt = time.perf_counter() - t0
    assert ids == pair.hf.encode(text, add_special_tokens=False).ids
    # ~200k characters; a quadratic merge loop would take minutes here.
    assert dt < 5.0, f"encoding {len(text)} chars took {dt:.2f}s"
