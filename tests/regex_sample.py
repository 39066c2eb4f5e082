"""Strings a regular expression matches, drawn from its parse tree (Python's own `re` parser), for
tests that need a URL each of ClawBench's url_patterns accepts. Each draw is checked with
`re.search`; lookaround is left to the check."""

from __future__ import annotations

import random
import re
import re._constants as C
import re._parser as P
import string

SAFE = string.ascii_lowercase + string.digits


def _char(items, rng: random.Random) -> str:
    negate = items and items[0][0] is C.NEGATE
    allowed: list[str] = []
    for op, av in items:
        if op is C.LITERAL:
            allowed.append(chr(av))
        elif op is C.RANGE:
            allowed += [chr(c) for c in range(av[0], min(av[1], av[0] + 40) + 1)]
        elif op is C.CATEGORY:
            allowed += {C.CATEGORY_DIGIT: list("0123456789"), C.CATEGORY_WORD: list(SAFE + "_"),
                        C.CATEGORY_SPACE: [" "]}.get(av, list(SAFE))
    if negate:
        return rng.choice([c for c in SAFE if c not in allowed] or ["~"])
    return rng.choice(allowed or list(SAFE))


def _emit(tree, rng: random.Random, groups: dict) -> str:
    out = []
    for op, av in tree:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append(rng.choice([c for c in SAFE if ord(c) != av]))
        elif op is C.ANY:
            out.append(rng.choice(SAFE))
        elif op is C.IN:
            out.append(_char(av, rng))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, high, sub = av
            count = rng.choice([low, low, low + 1, low + 2]) if high is C.MAXREPEAT else rng.randint(low, min(high, low + 2))
            out += [_emit(sub, rng, groups) for _ in range(count)]
        elif op is C.SUBPATTERN:
            text = _emit(av[-1], rng, groups)
            groups[av[0]] = text
            out.append(text)
        elif op is C.ATOMIC_GROUP:
            out.append(_emit(av, rng, groups))
        elif op is C.BRANCH:
            out.append(_emit(rng.choice(av[1]), rng, groups))
        elif op is C.GROUPREF:
            out.append(groups.get(av, ""))
    return "".join(out)


def sample(pattern: str, tries: int = 400, seed: int = 0) -> str | None:
    """A string `pattern` is found in (with an https:// scheme added where it names none), or None."""
    rng = random.Random(seed)
    tree = P.parse(pattern)
    for _ in range(tries):
        text = _emit(tree, rng, {})
        for candidate in (text, "https://" + text):
            if re.search(pattern, candidate) and candidate.startswith("http"):
                return candidate
    return None
