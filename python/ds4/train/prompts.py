"""The default prompt set ``ds4 train-drafter`` generates its data from when given none: requests
of the kinds users send (code to write, fix or explain; prose to write, summarise or answer),
composed from subjects and tasks, in a fixed order (the same set every run)."""

from __future__ import annotations

CODE_SUBJECTS = [
    "a function that reverses a linked list", "a binary search over a sorted list", "a class for a bank account",
    "parsing a CSV file and summing a column", "a memoized Fibonacci function", "an LRU cache",
    "merging two sorted arrays", "counting word frequencies in a text", "a stack with a min() in O(1)",
    "validating an email address with a regular expression", "reading a JSON config file with defaults",
    "a breadth-first search on a grid", "the quicksort algorithm", "a simple HTTP request with retries",
    "matrix multiplication without libraries", "a generator of prime numbers", "flattening a nested list",
    "a thread-safe counter", "converting Roman numerals to integers", "a trie with insert and search",
    "computing a moving average", "checking whether a string is a palindrome", "a priority queue of tasks",
    "a command-line argument parser", "deduplicating records by key", "a rate limiter",
]
LANGUAGES = ["Python", "JavaScript", "C", "Rust", "Go", "Java", "C++", "TypeScript"]
CODE_TASKS = [
    "Write {s} in {lang}.",
    "Write {s} in {lang}, with comments explaining each step.",
    "Explain how {s} works, then show an implementation in {lang}.",
    "Write unit tests in {lang} for {s}.",
]
PROSE_SUBJECTS = [
    "the water cycle", "how vaccines work", "the French Revolution", "black holes", "photosynthesis",
    "the history of the internet", "how a bicycle stays upright", "the causes of inflation", "coral reefs",
    "the printing press", "how memory works in the brain", "renewable energy", "the Roman Empire",
    "how airplanes fly", "climate change", "the life of honeybees", "volcanoes", "the stock market",
    "sleep and why we need it", "the moon landing", "machine learning", "the Silk Road", "earthquakes",
    "how a compiler works", "the human immune system", "public libraries",
]
PROSE_TASKS = [
    "Explain {s} to a ten-year-old.",
    "Write a short essay about {s}.",
    "Give me five key facts about {s}.",
    "Summarize what is known about {s} in one paragraph.",
    "Write a short story that involves {s}.",
    "What are common misconceptions about {s}?",
]


def default_prompts() -> list[str]:
    out = []
    for i, s in enumerate(CODE_SUBJECTS):
        for j, task in enumerate(CODE_TASKS):
            out.append(task.format(s=s, lang=LANGUAGES[(i + j) % len(LANGUAGES)]))
    for s in PROSE_SUBJECTS:
        out.extend(task.format(s=s) for task in PROSE_TASKS)
    return out


def corpus_prompts(n: int, seed: int = 0) -> list[str]:
    """n varied prompts from text every Python installation has: windows of its standard library's
    source (code to continue) and of the documentation of the installed packages (prose to
    continue), some wrapped in a request (explain, summarise, continue); drawn with `seed`."""
    import random
    import sysconfig
    from pathlib import Path

    rng = random.Random(seed)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    code = sorted(p for p in stdlib.glob("*.py") if p.stat().st_size > 2000)
    docs = sorted(p for p in Path(sysconfig.get_paths()["purelib"]).glob("*.dist-info/METADATA") if p.stat().st_size > 2000)
    asks = ["Explain what this code does:\n\n{t}", "Summarize the following text:\n\n{t}", "Continue this:\n\n{t}",
            "Find a bug in this code, if there is one:\n\n{t}", "Rewrite this more clearly:\n\n{t}"]
    out: list[str] = []
    while len(out) < n and (code or docs):
        src = rng.choice(code if (len(out) % 2 == 0 and code) or not docs else docs)
        text = src.read_text(errors="replace")
        if src.name == "METADATA":  # the description, after the header's fields
            text = text.split("\n\n", 1)[-1]
        lines = text.splitlines()
        at = rng.randrange(max(1, len(lines) - 40))
        text = "\n".join(lines[at:at + rng.randint(8, 30)]).strip()
        if len(text) < 200:
            continue
        out.append(rng.choice(asks).format(t=text) if rng.random() < 0.4 else text)
    return out
