"""Prompts for the speculation tests: code, prose, chat-like and repetitive text, so that drafts
are sometimes long and right, sometimes wrong, and sometimes absent."""

FUNCTION = '''def moving_average(values, window):
    total = sum(values[:window])
    out = [total / window]
    for i in range(window, len(values)):
        total += values[i] - values[i - window]
        out.append(total / window)
    return out
'''

PROMPTS = [
    FUNCTION + "\n# The same function with `total` renamed to `acc`:\n",
    FUNCTION + "\n# Repeat the function exactly:\n",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n",
    "import numpy as np\n\ndef softmax(x):\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n",
    "SELECT name, count(*) FROM users u JOIN orders o ON o.user_id = u.id GROUP BY",
    "#include <stdio.h>\n\nint main(void) {\n    for (int i = 0; i < 10; ++i) {\n",
    "fn main() {\n    let v: Vec<i32> = (0..10).collect();\n",
    "The river rose slowly through the night, and by morning",
    "Once upon a time, in a village at the edge of a great forest,",
    "The history of the printing press begins",
    "Photosynthesis is the process by which",
    "In 1969, the Apollo 11 mission",
    "The three most important things to know about memory bandwidth are",
    "Dear hiring manager,\n\nI am writing to apply for",
    "Q: What is the capital of France?\nA:",
    "User: Can you explain what a hash table is?\nAssistant:",
    "User: Write a haiku about autumn.\nAssistant:",
    "User: List three prime numbers.\nAssistant:",
    "<start_of_turn>user\nSummarize: The cat sat on the mat. The cat was happy.<end_of_turn>\n<start_of_turn>model\n",
    "one two three four five six seven eight nine ten one two three four five six seven",
    "a b c d e f g a b c d e f g a b c d e f g a b c",
    "red, green, blue, red, green, blue, red, green, blue,",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick",
    "Monday: gym. Tuesday: work. Wednesday: gym. Thursday: work. Friday:",
    "- item 1\n- item 2\n- item 3\n- item 4\n-",
    "<html>\n  <body>\n    <ul>\n      <li>one</li>\n      <li>two</li>\n",
    '{"name": "Ada", "age": 36, "languages": ["en", "fr"]}, {"name": "Alan", "age":',
    "To be, or not to be, that is the question:",
    "Translate to French: The weather is nice today. ->",
    "x = 1\ny = 2\nz = x + y\nprint(z)\nx = 3\ny = 4\nz = x + y\nprint(z)\n",
]
