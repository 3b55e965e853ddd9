"""Lint's warning about code whose output differs from one Python process to the next, where the
two proof runs (forks of one process) agree: a key "proved" so graded learners on chance."""

from __future__ import annotations

import pytest

from app.bank.unrepeatable import unrepeatable


@pytest.mark.parametrize(("code", "why"), [
    ('print({"float16", "bfloat16"})', "prints or walks a set"),
    ("for name in set(names):\n    print(name)", "walks a set"),
    ('print(", ".join({"a", "b"}))', "prints or walks a set"),
    ("print(id(object()) % 997)", "an object's address"),
    ('print(hash("abc") % 2)', "a string's hash"),
    ("import torch\nprint(torch.ones(1).data_ptr() % 64)", "a tensor's address"),
    ("import os\nprint(os.getpid())", "pid 1"),
    ("import time\nprint(int(time.time()) // 60 % 2)", "reads the clock"),
    ("import datetime\nprint(datetime.datetime.now().minute)", "reads the clock"),
    ("import random\nprint(random.randint(0, 1))", "Python's random module without random.seed()"),
    ("import numpy as np\nprint(np.random.rand() > 0.5)", "NumPy's global generator"),
    ("import numpy as np\nprint(np.random.default_rng().random())", "NumPy generator with no seed"),
    # Hidden from lint before (an AMP expert's plants): an alias, a name imported alone, a seed
    # taken from the OS, a set spread into print's arguments.
    ("import random as rnd\nprint(rnd.random() < 0.99)", "Python's random module without random.seed()"),
    ("from random import random\nprint(random() < 0.99)", "Python's random module without random.seed()"),
    ("import random\nrandom.seed()\nprint(random.random() < 0.99)", "Python's random module without random.seed()"),
    ("from numpy import random as npr\nprint(npr.rand() > 0.5)", "NumPy's global generator"),
    ('print(*{"bfloat16", "float16"})', "prints or walks a set"),
    ("from time import time\nprint(int(time()) % 2)", "reads the clock"),
    # Coin flips that passed both proof runs by luck (an AMP expert's plants, again): the OS's
    # randomness, torch's generator read into a value, a set printed through the name it was bound to.
    ("import os\nprint(os.urandom(1)[0] % 2)", "the OS's randomness"),
    ("import secrets\nprint(secrets.randbelow(2))", "the OS's randomness"),
    ("import uuid\nprint(uuid.uuid4().int % 2)", "the OS's randomness"),
    ("import torch\nprint(torch.rand(1).item() > 0.5)", "torch's generator without torch.manual_seed()"),
    ("import torch\nx = torch.empty(3).uniform_()\nprint(x.tolist())", "torch's generator without torch.manual_seed()"),
    ("from torch import randint\nprint(int(randint(0, 2, (1,))))", "torch's generator without torch.manual_seed()"),
    ('names = {"float16", "bfloat16"}\nprint(names)', "prints or walks a set"),
    ('names = set(["a", "b"])\nfor n in names:\n    print(n)', "walks a set"),
    # A second round of plants: a set walked in a comprehension, memory torch.empty left as it was.
    ('kinds = {"a", "b"}\nprint([k for k in kinds])', "walks a set"),
    ("import torch\nprint(torch.empty(4))", "torch.empty"),
    ("import torch\nx = torch.empty(2, 2)\nprint(x)", "torch.empty"),
    ("import torch\nimport torch.nn.functional as F\nprint(F.dropout(torch.ones(1), p=0.5))", "torch's generator"),
])  # fmt: skip
def test_what_differs_between_python_processes_is_named(code: str, why: str) -> None:
    said = unrepeatable(code)
    assert len(said) == 1 and why in said[0], said


@pytest.mark.parametrize("code", [
    "print(len(set([1.0, 1.0, 2.0])))",  # a set counted, not printed in its order
    'print(sorted({"float16", "bfloat16"}))',
    "import random\nrandom.seed(0)\nprint(random.randint(0, 9))",
    "import numpy as np\nnp.random.seed(0)\nprint(np.random.rand())",
    "import numpy as np\nprint(np.random.default_rng(0).random())",
    "import random as rnd\nrnd.seed(3)\nprint(rnd.random())",
    "from torch import random\nprint(random.initial_seed() > 0)",  # torch's own: left to the two runs
    "import torch\nx = torch.rand(4, 4, dtype=torch.float64)\nprint((x @ x).dtype)",  # torch's draws: left to the two runs
    "import torch\nx = torch.rand(4, 4)\nprint(x.float().dtype == torch.float32)",  # a dtype compared: no value read
    "import torch\ntorch.manual_seed(0)\nprint(torch.rand(1).item() > 0.5)",  # seeded: the same in every process
    'names = {"a", "b"}\nprint(len(names))',
    "import torch\nout = torch.empty(2)\ntorch.add(torch.ones(2), 1, out=out)\nprint(out)",  # filled before it is shown
    "import torch\nx = torch.empty(2)\nx.fill_(3)\nprint(x, torch.empty(2).dtype)",
    "print(",  # a syntax error is the run's to report
])  # fmt: skip
def test_code_that_prints_the_same_in_every_process_is_not_warned_about(code: str) -> None:
    assert unrepeatable(code) == []
