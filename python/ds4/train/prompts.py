"""The default prompt set ``ds4 train-drafter`` generates its data from when given none: requests
of the kinds users send (code to write, fix or explain; prose to write, summarise or answer;
advice; short creative forms) and code files to continue, composed from subjects and tasks, in a
fixed order (the same set every run)."""

from __future__ import annotations

import ast
import random
import sysconfig
from pathlib import Path

from ds4.train.prompts_chat import chat_prompts

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


ACTIVITIES = [
    "learn to cook", "start running", "save money each month", "write a cover letter", "keep houseplants alive",
    "prepare for an exam", "make friends in a new city", "clean a laptop keyboard", "learn a new language",
    "plan a birthday party", "reduce screen time", "negotiate a salary", "train a puppy", "start a vegetable garden",
    "give a presentation", "organize a small kitchen", "learn to play the guitar", "travel on a budget",
    "choose a laptop", "bake bread at home", "stay focused while working from home", "fix a slow computer",
    "write a thank-you note", "paint a room", "prepare for a long flight", "start journaling",
]
CHAT_TASKS = [
    "How do I {a}?", "Give me some tips to {a}.", "What are the most common mistakes people make when they {a}?",
    "I want to {a}. Where should I start?", "Make a step-by-step plan to {a}.",
]
FORMS = ["a poem", "a haiku", "a short dialogue", "a product description", "a motivational speech", "a short letter",
         "a riddle", "a news headline and a short article", "a fable with a moral", "a recipe"]
FORM_SUBJECTS = ["autumn leaves", "a robot learning to paint", "the ocean at night", "a lost umbrella", "coffee",
                 "a city in the rain", "friendship", "a very old tree", "the first day of school", "a talking dog"]
COMMENT = {"Python": "# {s}\n", "JavaScript": "// {s}\n", "C": "/* {s} */\n", "Rust": "// {s}\n", "Go": "// {s}\n",
           "Java": "// {s}\n", "C++": "// {s}\n", "TypeScript": "// {s}\n"}


def default_prompts() -> list[str]:
    """Requests (answered through the chat template or continued as text, see ds4.train.data) and
    code to continue: each code subject started as a file in two languages; then everyday chat
    requests (ds4.train.prompts_chat)."""
    out = []
    for i, s in enumerate(CODE_SUBJECTS):
        for j, task in enumerate(CODE_TASKS):
            out.append(task.format(s=s, lang=LANGUAGES[(i + j) % len(LANGUAGES)]))
        for lang in (LANGUAGES[i % len(LANGUAGES)], LANGUAGES[(i + 3) % len(LANGUAGES)]):
            out.append(COMMENT[lang].format(s=f"{s[0].upper()}{s[1:]}, in {lang}."))
    for s in PROSE_SUBJECTS:
        out.extend(task.format(s=s) for task in PROSE_TASKS)
    for a in ACTIVITIES:
        out.extend(task.format(a=a) for task in CHAT_TASKS)
    for i, form in enumerate(FORMS):
        out.extend(f"Write {form} about {s}." for s in FORM_SUBJECTS[i % 3::3])
    return out + [p for p in chat_prompts() if p not in out]


def _docstrings(files: list[Path]) -> list[str]:
    """The prose of these sources: their module, class and function docstrings of 400+ characters."""
    out = []
    for path in files:
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 400:
                    out.append(doc)
    return out


def corpus_prompts(n: int, seed: int = 0) -> list[str]:
    """n varied prompts from text every Python installation has, the same for one Python version
    whatever else is installed: windows of its standard library's source (code to continue) and of
    the standard library's docstrings (prose to continue), some wrapped in a request (explain,
    summarise, continue); drawn with `seed`."""
    rng = random.Random(seed)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    code = sorted(p for p in stdlib.glob("*.py") if p.stat().st_size > 2000)
    docs = _docstrings(code)
    asks = ["Explain what this code does:\n\n{t}", "Summarize the following text:\n\n{t}", "Continue this:\n\n{t}",
            "Find a bug in this code, if there is one:\n\n{t}", "Rewrite this more clearly:\n\n{t}"]
    out: list[str] = []
    while len(out) < n and (code or docs):
        if (len(out) % 2 == 0 and code) or not docs:
            lines = rng.choice(code).read_text(errors="replace").splitlines()
        else:
            lines = rng.choice(docs).splitlines()
        at = rng.randrange(max(1, len(lines) - 40))
        text = "\n".join(lines[at:at + rng.randint(8, 30)]).strip()
        if len(text) < 200:
            continue
        out.append(rng.choice(asks).format(t=text) if rng.random() < 0.4 else text)
    return out
