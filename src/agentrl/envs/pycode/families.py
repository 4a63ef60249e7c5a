"""Task families of the Python-interpreter environment: seeded problems with exact answers.

Each family draws one `Problem` from a `random.Random`: the question, the exact answer (as the
canonical text `check_answer` compares against) and a reference program that prints it (the
solver baseline's code). `hard=True` draws from parameter ranges the training split never uses.
Pure: standard library only.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FAMILIES", "Problem", "canonical_answer", "check_answer"]


@dataclass(frozen=True)
class Problem:
    """One task: what is asked, the exact answer and a program printing `ANSWER: <answer>`."""

    family: str
    question: str
    answer: str
    code: str


def canonical_answer(text: str) -> str:
    """The form answers are compared in: trimmed, lower-case, no thousands separators, no
    surrounding quotes or final period, inner whitespace collapsed."""
    text = " ".join(text.strip().split()).strip("\"'`").rstrip(".").strip()
    if text.replace(",", "").replace("_", "").lstrip("-").isdigit():
        text = text.replace(",", "").replace("_", "")
    return text.lower()


def check_answer(given: str, expected: str) -> bool:
    """Exact check: equal canonical forms."""
    return canonical_answer(given) == canonical_answer(expected)


def _program(body: str) -> str:
    return f"{body}\nprint('ANSWER:', answer)"


def bignum(rng: random.Random, hard: bool) -> Problem:
    base, power = rng.randint(2, 99), rng.randint(40, 120) if not hard else rng.randint(150, 400)
    kind = rng.choice(["digit_sum", "product"])
    if kind == "digit_sum":
        answer = sum(int(d) for d in str(base**power))
        question = f"What is the sum of the decimal digits of {base}^{power}?"
        code = f"answer = sum(int(d) for d in str({base} ** {power}))"
    else:
        digits = 25 if not hard else 45
        a, b = rng.randrange(10 ** (digits - 1), 10**digits), rng.randrange(10**19, 10**20)
        answer = a * b
        question = f"Compute {a} * {b} exactly."
        code = f"answer = {a} * {b}"
    return Problem("bignum", question, str(answer), _program(code))


def modular(rng: random.Random, hard: bool) -> Problem:
    m = rng.randint(1_000, 1_000_000) if not hard else rng.randint(10**9, 10**12)
    a, e = rng.randint(2, 10**6), rng.randint(10**6, 10**12)
    if rng.random() < 0.5:
        question = f"What is {a}^{e} mod {m}?"
        answer, code = pow(a, e, m), f"answer = pow({a}, {e}, {m})"
    else:
        p = rng.choice([1_000_003, 998_244_353, 1_000_000_007])
        x = rng.randint(2, p - 1)
        question = f"What is the inverse of {x} modulo the prime {p} (a number in [1, {p - 1}])?"
        answer, code = pow(x, -1, p), f"answer = pow({x}, -1, {p})"
    return Problem("modular", question, str(answer), _program(code))


def combinatorics(rng: random.Random, hard: bool) -> Problem:
    n = rng.randint(10, 40) if not hard else rng.randint(60, 120)
    kind = rng.choice(["choose", "paths", "derangements"])
    if kind == "choose":
        k = rng.randint(2, n - 2)
        question = f"In how many ways can {k} items be chosen from {n} distinct items?"
        answer, code = math.comb(n, k), f"import math\nanswer = math.comb({n}, {k})"
    elif kind == "paths":
        w, h = rng.randint(3, n), rng.randint(3, n)
        question = (
            f"How many shortest lattice paths go from (0, 0) to ({w}, {h}) using unit steps "
            "right and up?"
        )
        answer, code = math.comb(w + h, w), f"import math\nanswer = math.comb({w + h}, {w})"
    else:
        d = [1, 0]
        for i in range(2, n + 1):
            d.append((i - 1) * (d[-1] + d[-2]))
        question = f"How many permutations of {n} elements have no fixed point?"
        answer = d[n]
        code = (
            "d = [1, 0]\n"
            f"for i in range(2, {n} + 1):\n    d.append((i - 1) * (d[-1] + d[-2]))\n"
            f"answer = d[{n}]"
        )
    return Problem("combinatorics", question, str(answer), _program(code))


def sequences(rng: random.Random, hard: bool) -> Problem:
    n = rng.randint(50, 300) if not hard else rng.randint(1_000, 5_000)
    m = rng.randint(1_000, 100_000)
    if rng.random() < 0.5:
        a, b = 0, 1
        for _ in range(n):
            a, b = b, (a + b) % m
        question = f"Let F(0)=0, F(1)=1, F(k)=F(k-1)+F(k-2). What is F({n}) mod {m}?"
        code = f"a, b = 0, 1\nfor _ in range({n}):\n    a, b = b, (a + b) % {m}\nanswer = a"
        return Problem("sequences", question, str(a), _program(code))
    x0, c, d = rng.randint(1, 100), rng.randint(2, 50), rng.randint(1, 99)
    x = x0
    for _ in range(n):
        x = (c * x + d) % m
    question = f"Let x(0)={x0} and x(k+1) = ({c} * x(k) + {d}) mod {m}. What is x({n})?"
    code = f"x = {x0}\nfor _ in range({n}):\n    x = ({c} * x + {d}) % {m}\nanswer = x"
    return Problem("sequences", question, str(x), _program(code))


def dates(rng: random.Random, hard: bool) -> Problem:
    lo, hi = (1900, 2100) if not hard else (1601, 2400)
    first = dt.date(rng.randint(lo, hi), rng.randint(1, 12), rng.randint(1, 28))
    if rng.random() < 0.5:
        question = f"On which day of the week did (or will) {first.isoformat()} fall?"
        answer = first.strftime("%A")
        code = (
            f"import datetime\nanswer = datetime.date({first.year}, {first.month}, "
            f"{first.day}).strftime('%A')"
        )
        return Problem("dates", question, answer, _program(code))
    second = first + dt.timedelta(days=rng.randint(1, 40_000))
    question = f"How many days are there from {first.isoformat()} to {second.isoformat()}?"
    days = (second - first).days
    code = (
        f"import datetime\nanswer = (datetime.date({second.year}, {second.month}, {second.day})"
        f" - datetime.date({first.year}, {first.month}, {first.day})).days"
    )
    return Problem("dates", question, str(days), _program(code))


def strings(rng: random.Random, hard: bool) -> Problem:
    length = rng.randint(40, 80) if not hard else rng.randint(120, 200)
    alphabet = "abcde" if rng.random() < 0.5 else "xyz"
    text = "".join(rng.choice(alphabet) for _ in range(length))
    kind = rng.choice(["count", "palindromes", "runs"])
    if kind == "count":
        pair = rng.choice(alphabet) + rng.choice(alphabet)
        count = sum(1 for i in range(len(text) - 1) if text[i : i + 2] == pair)
        question = f"How many (possibly overlapping) times does {pair!r} occur in {text!r}?"
        code = f"s = {text!r}\nanswer = sum(1 for i in range(len(s) - 1) if s[i:i + 2] == {pair!r})"
        answer = str(count)
    elif kind == "palindromes":
        found = {text[i:j] for i in range(len(text)) for j in range(i + 2, len(text) + 1)}
        answer = str(sum(1 for s in found if s == s[::-1]))
        question = f"How many distinct palindromic substrings of length >= 2 does {text!r} have?"
        code = (
            f"s = {text!r}\nfound = {{s[i:j] for i in range(len(s)) "
            "for j in range(i + 2, len(s) + 1)}\nanswer = sum(1 for t in found if t == t[::-1])"
        )
    else:
        best = max(len(run) for run in _runs(text))
        question = f"What is the length of the longest run of one repeated letter in {text!r}?"
        code = (
            f"import itertools\ns = {text!r}\n"
            "answer = max(len(list(g)) for _, g in itertools.groupby(s))"
        )
        answer = str(best)
    return Problem("strings", question, str(answer), _program(code))


def _runs(text: str) -> list[str]:
    runs: list[str] = []
    for char in text:
        if runs and runs[-1][0] == char:
            runs[-1] += char
        else:
            runs.append(char)
    return runs


FAMILIES: dict[str, Callable[[random.Random, bool], Problem]] = {
    "bignum": bignum,
    "modular": modular,
    "combinatorics": combinatorics,
    "sequences": sequences,
    "dates": dates,
    "strings": strings,
}
"""Every task family by name."""
