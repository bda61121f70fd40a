"""Everyday chat requests for the default prompt set (ds4.train.prompts): the questions, definitions,
comparisons, advice, programming questions and small writing jobs users send an assistant, so that
a drafter learns how the target answers a chat turn rather than only code and essays. Composed from
short lists, in a fixed order."""

from __future__ import annotations

QUESTIONS = [
    "Why do cats purr?", "How do birds know where to migrate?", "Why does bread go stale?", "How does a fridge keep food cold?",
    "Why do onions make you cry?", "How do plants know which way is up?", "Why is the ocean salty?",
    "How does soap remove grease?", "Why do we yawn?", "How do noise-cancelling headphones work?",
    "Why do leaves change color in the fall?", "How does a microwave oven heat food?", "Why do we have seasons?",
    "How do bees make honey?", "Why does ice float on water?", "How does GPS know where I am?", "Why do we dream?",
    "How do fish breathe underwater?", "Why is it hotter in summer?", "How does a touchscreen detect a finger?",
    "Why do stars twinkle?", "How do vaccines get tested before they are approved?", "Why do some people snore?",
    "How does a credit score work?", "Why does metal feel colder than wood?", "How do tides work?",
    "Why do we get goosebumps?", "How does a car engine work?", "Why do dogs wag their tails?",
    "How is paper made?", "Why do apples turn brown after you cut them?", "How does Wi-Fi work?",
    "Why do cats land on their feet?", "How do solar panels make electricity?", "Why does the moon change shape?",
    "How do submarines dive and surface?", "Why do we need vitamins?", "How does an elevator work?",
    "Why do mosquitoes bite some people more than others?", "How do earthquakes get measured?",
    "Why does coffee keep people awake?", "How do rainbows form?", "Why do our fingers wrinkle in water?",
    "How does a battery store energy?", "Why do people get jet lag?", "How do chameleons change color?",
    "Why is exercise good for the brain?", "How does a 3D printer work?", "Why do we hiccup?",
    "How do glasses correct vision?", "Why does salt melt ice on roads?", "How do owls see in the dark?",
    "Why do babies sleep so much?", "How does compound interest work?", "Why do balloons stick to a wall after rubbing?",
    "How do antibiotics kill bacteria?", "Why is the Dead Sea so salty?", "How do clouds stay up in the air?",
    "Why do we blush?", "How does a thermostat work?", "Why do some trees lose their leaves in winter?",
    "How do airplanes stay in the air when the engines are off?", "Why do we need to drink water every day?",
    "How does a refrigerator's ice maker work?", "Why do cities feel hotter than the countryside?",
    "How do elections work in a parliamentary system?", "Why is biodiversity important?",
    "How does a password manager keep my passwords safe?", "Why does my phone battery drain faster in the cold?",
    "How do spiders spin webs?", "Why do old books smell the way they do?", "How does the heart pump blood?",
    "Why do we have different blood types?", "How does a camera lens focus?", "Why did the dinosaurs go extinct?",
    "How do hurricanes form?", "Why do some foods cause heartburn?", "How is chocolate made?",
    "Why do we feel dizzy after spinning?", "How does recycling plastic work?", "Why do cats knead with their paws?",
    "How does the stock exchange set prices?", "Why do people speak different languages?", "How do whales communicate?",
    "Why do we celebrate new year on January 1st?", "How do hearing aids work?", "Why is gold so valuable?",
    "How do lightning rods protect buildings?", "Why do some people need glasses?", "How does caffeine affect the body?",
    "Why does the wind blow?", "How is cheese made?", "Why do we forget things?", "How do electric cars charge?",
    "Why do bananas turn brown?", "How do pyramids stay standing for thousands of years?", "Why do we sneeze?",
    "How does an MRI scanner work?", "Why do rivers bend?", "How do ants find food?", "Why is yawning contagious?",
]

TERMS = [
    "inflation", "a mortgage", "an index fund", "the greenhouse effect", "DNA", "a black hole", "blockchain",
    "machine learning", "a virus", "photosynthesis", "democracy", "a recession", "gravity", "an algorithm",
    "a placebo", "the immune system", "encryption", "a budget", "cloud computing", "evolution", "a calorie",
    "a firewall", "a metaphor", "supply and demand", "an ecosystem", "a neural network", "a vaccine",
    "the speed of light", "a hypothesis", "mindfulness", "a carbon footprint", "interest rates", "an atom",
    "a stock", "a bond", "the internet", "a database", "compound interest", "a protein", "a galaxy",
    "open source software", "a search engine", "a semiconductor", "renewable energy", "a tax return",
    "cholesterol", "a sonnet", "impressionism", "the scientific method", "a web browser", "a server",
    "the water table", "an operating system", "a spreadsheet", "antibodies", "a credit card", "plate tectonics",
    "a startup", "a podcast", "a time zone", "quantum computing", "a gene", "the Big Bang", "metabolism",
    "a solar eclipse", "a pension", "a franchise", "jazz", "an allergy", "a democracy's separation of powers",
    "a hash function", "a contract", "an insurance deductible", "sustainability", "a cell", "a watershed",
    "a virtual machine", "a symphony", "a haiku", "a sourdough starter", "fermentation", "an electric current",
    "a magnetic field", "the placebo effect", "a smart contract", "a VPN", "a cookie in a web browser",
]
TERM_TASKS = ["What is {t}?", "Explain {t} in simple terms.", "What is {t} used for, and how does it work?"]

PAIRS = [
    ("weather", "climate"), ("a virus", "a bacterium"), ("baking soda", "baking powder"), ("RAM", "storage"),
    ("a crocodile", "an alligator"), ("affect", "effect"), ("a stock", "a bond"), ("speed", "velocity"),
    ("a debit card", "a credit card"), ("a psychologist", "a psychiatrist"), ("HTTP", "HTTPS"),
    ("a comet", "an asteroid"), ("empathy", "sympathy"), ("a lake", "a pond"), ("Python", "JavaScript"),
    ("a laptop", "a desktop computer"), ("renting", "buying a home"), ("a hurricane", "a tornado"),
    ("a frog", "a toad"), ("butter", "margarine"), ("a teaspoon", "a tablespoon"), ("an ocean", "a sea"),
    ("a democracy", "a republic"), ("a rabbit", "a hare"), ("LED", "incandescent bulbs"), ("SQL", "NoSQL databases"),
    ("a latte", "a cappuccino"), ("an emigrant", "an immigrant"), ("a simile", "a metaphor"),
    ("weight", "mass"), ("a herb", "a spice"), ("an app", "a website"), ("a fruit", "a vegetable"),
    ("a moth", "a butterfly"), ("Git", "GitHub"), ("a compiler", "an interpreter"), ("a hub", "a router"),
    ("a cold", "the flu"), ("a goal", "a habit"), ("saving", "investing"), ("a noun", "a verb"),
    ("a process", "a thread"), ("a class", "an object"), ("an array", "a linked list"), ("a loan", "a grant"),
    ("an essay", "a report"), ("a novel", "a novella"), ("a violin", "a viola"), ("a city", "a town"),
    ("stress", "anxiety"),
]
PAIR_TASKS = ["What is the difference between {a} and {b}?", "Compare {a} and {b}."]

ACTIVITIES = [
    "learn to swim as an adult", "get better at chess", "write a good resume", "start a small business",
    "learn to draw", "meditate", "run a marathon", "make sushi at home", "learn to code", "buy a used car",
    "move to a new apartment", "prepare for a job interview over video", "take better photos with my phone",
    "read more books", "wake up earlier", "stop procrastinating", "build a website", "grow tomatoes on a balcony",
    "learn to touch type", "cook for a large group", "pay off credit card debt", "plan a road trip",
    "back up my computer", "set up a home network", "learn to sew", "improve my handwriting",
    "talk to my boss about a raise", "teach a child to ride a bike", "make my own pasta", "start a podcast",
    "deal with a difficult coworker", "learn to juggle", "keep a budget", "get rid of clutter", "make a compost pile",
    "prepare for a hurricane", "host a dinner party", "study for a math test", "learn to dance salsa",
    "choose a good password", "write a short story", "learn to meditate with a busy schedule", "apply to college",
    "plan a wedding on a budget", "care for a cat", "learn photography", "do a pull-up", "fix a leaky faucet",
    "build a bookshelf", "write a speech for a friend's wedding", "keep a journal", "brew beer at home",
    "learn to knit", "stay motivated at the gym", "memorize a speech", "make cold brew coffee",
    "choose a running shoe", "volunteer in my community", "learn sign language", "raise chickens",
]
ADVICE_TASKS = ["How do I {a}?", "Give me some tips to {a}.", "I want to {a}. Where should I start?",
                "Make a step-by-step plan to {a}.", "What mistakes should I avoid when I {a}?"]

WRITING_SUBJECTS = [
    "a lighthouse keeper", "the first snow of winter", "a forgotten birthday", "a dragon who is afraid of fire",
    "a train journey", "the smell of rain", "a grandmother's kitchen", "a broken clock", "the last day of summer",
    "a shy astronaut", "a garden at dawn", "a lost key", "a busy market", "a cat who rules the house",
    "a message in a bottle", "a mountain village", "a kind stranger", "a rainy Monday", "a library at midnight",
    "a small boat in a storm", "a new neighbor", "an old photograph", "a city that never sleeps",
    "a bicycle", "the sound of the sea", "a robot who wants a friend", "moving to a new country", "a snowman",
    "a painter who lost her colors", "the moon", "a tiny frog", "a hot air balloon", "a marathon runner",
    "a pair of old shoes", "a birthday cake", "the desert at night", "a chess game", "a stray dog",
    "the first day at a new job", "a thunderstorm",
]
WRITING_FORMS = ["a poem", "a haiku", "a short story", "a short dialogue", "a fable with a moral",
                 "a diary entry", "a song chorus", "a children's story", "a descriptive paragraph", "a tweet"]

PROGRAMMING = [
    "How do I read a file line by line in Python?", "How do I sort a dictionary by value in Python?",
    "What does the 'this' keyword mean in JavaScript?", "How do I reverse a string in Java?",
    "What is a segmentation fault and how do I fix one?", "How do I undo the last commit in Git?",
    "What is the difference between == and === in JavaScript?", "How do I make an HTTP request in Python?",
    "What is a race condition?", "How do I remove duplicates from an array in JavaScript?",
    "What is recursion? Give an example.", "How do I check if a key exists in a Python dictionary?",
    "What is a pointer in C?", "How do I handle exceptions in Java?", "What is Big O notation?",
    "How do I create a virtual environment in Python?", "What is the difference between a stack and a queue?",
    "How do I center a div in CSS?", "What is a closure in JavaScript?", "How do I write a for loop in Rust?",
    "What is dependency injection?", "How do I convert a string to an integer in C++?",
    "What is a REST endpoint?", "How do I merge two dictionaries in Python?", "What is garbage collection?",
    "How do I find the largest number in a list without using max()?", "What is a hash map and why is it fast?",
    "How do I write a unit test in Python?", "What is an SQL join? Show an example.", "How do I use async/await?",
    "What is the difference between a compiled and an interpreted language?", "How do I parse JSON in Go?",
    "What is a memory leak?", "How do I format a date in JavaScript?", "What is object-oriented programming?",
    "How do I debug a program that crashes?", "What are environment variables and how do I use them?",
    "How do I count the lines of a file in Bash?", "What is a regular expression? Give three examples.",
    "How do I make a class in Python?", "What is the difference between git merge and git rebase?",
    "How do I reverse a list in Python?", "What is a lambda function?", "How do I read user input in C?",
    "What is the difference between an interface and an abstract class?", "How do I split a string in Rust?",
    "What is a deadlock and how can it be avoided?", "How do I profile slow Python code?",
    "What is type inference?", "How do I write a Dockerfile for a Python app?",
    "Why is my Python loop so slow?", "What does 'immutable' mean?", "How do I generate random numbers in Java?",
    "What is the difference between TCP and UDP?", "How do I iterate over a map in C++?",
    "What is a callback function?", "How do I connect to a SQLite database in Python?",
    "What is functional programming?", "How do I round a number to two decimals in JavaScript?",
    "What is the purpose of a main function?",
]

ERRANDS = [
    "Write an email to my landlord about a broken heater.", "Write a polite reminder to a friend who owes me money.",
    "Write a short toast for my sister's graduation.", "Help me write a text asking my neighbor to turn down the music.",
    "Write a product review of a pair of headphones.", "Write a short bio for my personal website. I am a teacher.",
    "Write an apology email for missing a meeting.", "Write a birthday message for my grandfather.",
    "Suggest ten names for a bakery.", "Suggest five names for a golden retriever puppy.",
    "Write an out-of-office reply for my vacation next week.", "Write a short speech to welcome new students.",
    "Plan a three-day trip to Rome.", "Plan a week of healthy dinners.", "Give me a simple workout for beginners.",
    "Suggest some board games for a family evening.", "Write a cover letter for a barista job.",
    "Write a resignation letter that is friendly and short.", "Write a thank-you email after a job interview.",
    "Give me ideas for a rainy day with kids.", "Write a shopping list for a barbecue for ten people.",
    "Write a complaint to an airline about lost luggage.", "Suggest a reading list for someone new to science fiction.",
    "Write a short announcement that our office will be closed on Friday.", "Write a recipe for a simple vegetable soup.",
    "Give me three ideas for a science fair project.", "Summarize the plot of Romeo and Juliet.",
    "Summarize the plot of The Odyssey in a few sentences.", "Write a short invitation to a housewarming party.",
    "Help me write a message to cancel a gym membership.", "Give me a list of questions to ask a new doctor.",
    "Write a packing list for a beach holiday.", "Suggest five fun facts about octopuses.",
    "Give me a quick explanation of the rules of soccer.", "Write a short motivational message for a friend before an exam.",
    "Tell me a joke about computers.", "Tell me an interesting fact about space.",
    "Translate 'Where is the train station?' into Spanish and French.", "Correct the grammar: 'me and him goes to the store yesterday'.",
    "Rewrite this sentence to sound more formal: 'we gotta fix this asap'.",
]


def chat_prompts() -> list[str]:
    out = list(QUESTIONS)
    for t in TERMS:
        out.extend(task.format(t=t) for task in TERM_TASKS)
    for a, b in PAIRS:
        out.extend(task.format(a=a, b=b) for task in PAIR_TASKS)
    for a in ACTIVITIES:
        out.extend(task.format(a=a) for task in ADVICE_TASKS)
    for i, form in enumerate(WRITING_FORMS):
        out.extend(f"Write {form} about {s}." for s in WRITING_SUBJECTS[i % 2::2])
    out.extend(PROGRAMMING)
    out.extend(ERRANDS)
    return out
