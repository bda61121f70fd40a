"""The tokenizer test corpus: hand-written hard cases plus seeded random mixtures of them.

Deterministic (fixed seed), so a failure names the same string on every run.
"""

from __future__ import annotations

import random

WORDS = {
    "en": "the quick brown fox jumps over lazy dog Hello World tokenizer Speculative decoding pays".split(),
    "contractions": ["don't", "I'm", "we're", "they've", "she'll", "he'd", "it's", "DON'T", "I'M", "WE'RE",
                     "THEY'VE", "SHE'LL", "HE'D", "IT'S", "y'all", "'s", "'T", "'Re", "o'clock", "rock'n'roll",
                     "'ſ", "l'été"],
    "cjk": ["日本語", "東京タワー", "中文字符", "你好，世界", "漢字かなカナ", "𠀀𠀁", "龘", "テスト。"],
    "ko": ["안녕하세요", "세계", "한국어 텍스트", "ㄱㄴㄷ"],
    "ar": ["مرحبا", "بالعالم", "العربية", "٣٤٥", "ﷺ"],
    "hi": ["नमस्ते", "दुनिया", "हिन्दी", "१२३", "क्षत्रिय"],
    "th": ["สวัสดี", "ชาวโลก", "ภาษาไทย", "๑๒๓"],
    "ru": ["Привет", "мир", "ЁЖИК", "ёжик", "Україна"],
    "el": ["Γειά", "σου", "Κόσμε", "ΑΒΓΔ", "ά"],
    "he": ["שלום", "עולם", "עִבְרִית"],
    "misc": ["naïve", "café", "Å", "e\u0301", "ﬁ", "Ⅻ", "½", "²", "①", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ꟊ", "ꟋꟌ", "\U00011f00"],
    "emoji": ["😀", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "🇺🇸🇯🇵", "❤️", "🤖", "✨✨", "🧑🏿\u200d💻"],
    "digits": ["0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "1,000,000", "2024-06-01",
               "0x1F", "1e-9", "٤٢", "١٢٣٤"],
    "punct": ["!", "!!!", "...", "?!?", "---", "***", "(())", "<<>>", "\"'`", "#", "@user", "a.b.c", ";", "::",
              "->", "=>", "!=", "&&", "||", "/*", "*/", "//", "«»", "“quotes”", "—", "…", "¿¡"],
    "ws": [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", " \t ",
           "\u00a0", "\u3000", "\u2009", "\u200b", "\x0b", "\x0c", "\x1c", "\x85"],
    "special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>", "<bos>",
                "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<|fim_prefix|>", "<|fim_middle|>",
                "<repo_name>", "<file_sep>", "<0x41>", "<|im_start", "<start_of_turn", "<|endoftext|><|im_end|>"],
}

CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "if __name__ == '__main__':\n    main()\n",
    "    indented\n        more\n\ttab\n",
    "x=1;y=2\r\nz = x+y\r\n",
    "<div class=\"a\">Hello &amp; welcome</div>",
    "$ ls -la | grep '\\.py$' > out.txt 2>&1",
]

HARD = [
    "", " ", "  ", "\n", "\t", "\r\n", "a", "A", " a", "a ", "  a  ", "Hello world", " Hello world",
    "Hello  world", "Hello   world", "Hello\tworld", "Hello\nworld", "Hello\n\nworld", "Hello \n world",
    "trailing spaces   ", "   leading spaces", "\n\n\nleading newlines", "trailing newlines\n\n\n",
    "mixed \t \n \r\n whitespace \u00a0 \u3000 end", "a\r\rb", "a\r\n\r\nb", "  \n  \n  ",
    "I'm sure you're right, they've said we'll see, he'd know, don't they? IT'S I'LL WE'VE",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D",
    "12345678901234567890", "1 12 123 1234 12345 123456", "3.141592653589793", "$1,234.56", "v1.2.3-rc4",
    "!!!???...,,,;;;:::", "((([[[{{{}}}]]])))", "----====++++", "a!b@c#d$e%f^g&h*i",
    "日本語のテキストです。", "中文测试：你好，世界！", "한국어 문장입니다.", "مرحبا بالعالم", "नमस्ते दुनिया",
    "สวัสดีชาวโลก", "Привет, мир!", "Γειά σου Κόσμε", "שלום עולם", "Tiếng Việt có dấu",
    "👨\u200d👩\u200d👧\u200d👦 family", "🏳️\u200d🌈 flag", "emoji👍🏽mid", "🎉🎉🎉", "👍\n👍",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "text<|endoftext|>more", "<bos><bos>", "<eos>", "<|im_start|><|im_end|>", "a<mask>b", "[multimodal]x",
    "<<|im_start|>>", "<|im_start|", "<start_of_turn", " <start_of_turn> ", "\n\n<start_of_turn>\n\n",
    "\u2581already marked", "\u2581\u2581", "▁ ▁", "Ġ", "ĠHello", "Ċ", "<0x0A>", "<0xFF>", "<unk>",
    "\x00", "\x01\x02", "\x7f", "\ufffd", "\ufeffbom", "\ue000private", "\U0010ffff", "a\u0301\u0302",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕥𝕖𝕩𝕥", "ﬁﬂ ligatures", "ǅ ǈ ǋ titlecase", "Ⅷ ⅷ", "x² y³", "ꟊꟋ new letters",
    "a" * 300, " " * 100, "\n" * 50, "ab" * 200, "日本" * 100, "1" * 100, "!" * 100, "\t" * 40 + "x",
] + CODE


def _fragment(rng: random.Random) -> str:
    kind = rng.choice(list(WORDS) + ["code", "random", "random", "ascii"])
    if kind == "code":
        s = rng.choice(CODE)
        a = rng.randrange(len(s))
        return s[a:a + rng.randrange(1, 60)]
    if kind == "random":
        ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F),
                  (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2100, 0x27BF), (0x3000, 0x30FF),
                  (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xA700, 0xA7FF), (0xFB00, 0xFFFD), (0x10000, 0x1034F),
                  (0x1D400, 0x1D7FF), (0x1F300, 0x1FAFF), (0x20000, 0x2A6DF), (0x0, 0x1F)]
        out = []
        for _ in range(rng.randrange(1, 8)):
            lo, hi = rng.choice(ranges)
            out.append(chr(rng.randint(lo, hi)))
        return "".join(out)
    if kind == "ascii":
        return "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randrange(1, 12)))
    w = rng.choice(WORDS[kind])
    r = rng.random()
    if kind in ("en", "ru", "el") and r < 0.2:
        w = w.upper()
    elif kind in ("en", "ru", "el") and r < 0.3:
        w = w.capitalize()
    return w


def corpus(n_random: int = 2000, seed: int = 20240601) -> list[str]:
    rng = random.Random(seed)
    out = list(HARD)
    seps = ["", " ", " ", " ", "  ", "\n", "\t", "\r\n", " \n", "\n\n"]
    for i in range(n_random):
        parts = [_fragment(rng) for _ in range(rng.randrange(1, 14))]
        s = ""
        for p in parts:
            s += p + rng.choice(seps)
        if rng.random() < 0.3:
            s = s.rstrip()
        if rng.random() < 0.15:
            s = rng.choice(seps[1:]) + s
        out.append(s)
    return out


def long_text(seed: int = 7, n_chars: int = 200_000) -> str:
    """A long mixed document, for speed (and equality on something large)."""
    rng = random.Random(seed)
    chunks = []
    total = 0
    while total < n_chars:
        c = _fragment(rng) + rng.choice([" ", " ", "\n", ""])
        chunks.append(c)
        total += len(c)
    return "".join(chunks)
