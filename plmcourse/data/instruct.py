"""Every task as text (notebook 15): small synthetic tasks written as instruction + input -> output,
and answer pairs ranked by a rule a reader can see.

    TASKS, FAMILIES                 the tasks: one per (family, parameter), e.g. ("replace", "ab")
    Task                            .instruction(phrasing), .solve(x), .name
    task_split(seed)                (train_tasks, held_out_tasks, unseen_family_tasks)
    spread_over_families(tasks, n)  n of the tasks, the families taking turns (every family before a second of any)
    instruction_examples(tasks, n, rng, ...)   (prompt, answer) strings: "replace a with b: abca=" -> "bbcb."
    VOCAB, encode, decode           one token per character; id 0 is padding
    encode_pairs(prompts, answers)  (tokens (B, T), answer_mask (B, T)): the answer's characters marked
    answer_score(answer, target)    the preference rule: 2 correct and short, 1 correct and long, 0 wrong
    preference_pairs(tasks, n, rng) (prompt, chosen, rejected) triples ranked by that rule

A task reads a string of 4 to 6 letters from "abcdef". Its instruction names what to do and,
for most families, with what ("replace c with f", "drop d", "count a", "item 3"). A model that
has seen only a few tasks can remember them one by one; one that has seen many has to read the
instruction. Held-out tasks are unseen (family, parameter) combinations, for instance
"replace c with f" when training saw "replace c with a" and "replace e with f" but never both;
the unseen family ("sort") is never trained at all.

Answers end with "."; a "long" answer is a correct one followed by chatter (" ok ok").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LETTERS", "FAMILIES", "Task", "TASKS", "task_split", "spread_over_families", "instruction_examples", "VOCAB", "PAD", "encode",
           "decode", "encode_pairs", "answer_score", "verbose", "corrupt", "preference_pairs", "END", "CHATTER"]

LETTERS = "abcdef"  # the letters inputs are written in
END = "."  # every answer ends with it
CHATTER = " ok ok"  # what a long answer adds after the right one
VOCAB = "_ " + "abcdefghijklmnopqrstuvwxyz" + "0123456789" + ":=."  # id 0 ("_") is padding
PAD = 0
_ID = {c: i for i, c in enumerate(VOCAB)}

# family -> (two phrasings of its instruction, with {p} for the parameter's first part and {q} its second)
FAMILIES = {
    "replace": ("replace {p} with {q}", "turn {p} into {q}"),
    "drop": ("drop {p}", "remove every {p}"),
    "count": ("count {p}", "how many {p}"),
    "item": ("item {p}", "letter number {p}"),
    "reverse": ("reverse", "backwards"),
    "sort": ("sort", "in order"),
}


@dataclass(frozen=True)
class Task:
    """One task: a family and its parameter ("ab": replace a with b; "c": drop c; "3": item 3; "": none)."""

    family: str
    param: str = ""

    @property
    def name(self):
        return self.instruction(0)

    def instruction(self, phrasing=0):
        p, q = (self.param + "  ")[:2]
        return FAMILIES[self.family][phrasing].format(p=p, q=q)

    def solve(self, x):
        """The right output for input x (a string of letters)."""
        f, p = self.family, self.param
        if f == "replace":
            return x.replace(p[0], p[1])
        if f == "drop":
            return x.replace(p, "")
        if f == "count":
            return str(x.count(p))
        if f == "item":
            return x[int(p) - 1]
        if f == "reverse":
            return x[::-1]
        if f == "sort":
            return "".join(sorted(x))
        raise ValueError(f"unknown family {f!r}")

    def draw_input(self, rng):
        """A random input this task has something to do on (the letter it names appears in it)."""
        n = int(rng.integers(4, 7))
        x = list(rng.choice(list(LETTERS), size=n))
        if self.family in ("replace", "drop", "count"):
            x[int(rng.integers(n))] = self.param[0]
        if self.family == "drop" and all(c == self.param for c in x):  # something must be left
            x[0] = next(c for c in LETTERS if c != self.param)
        return "".join(x)


TASKS = ([Task("replace", a + b) for a in LETTERS for b in LETTERS if a != b]
         + [Task("drop", a) for a in LETTERS] + [Task("count", a) for a in LETTERS]
         + [Task("item", str(k)) for k in range(1, 5)] + [Task("reverse"), Task("sort")])

UNSEEN_FAMILY = "sort"


def task_split(seed=0, held_out=(8, 1, 1, 1)):
    """(train_tasks, held_out_tasks, unseen_family_tasks) for this seed.

    held_out: how many tasks of replace, drop, count and item to hold out (unseen combinations of a
    seen family and a parameter); every task of the unseen family ("sort") is held out as well, apart.
    The training tasks come in a random order, so that tasks[:n] is a random set of n of them.
    """
    rng = np.random.default_rng(seed)
    train, held = [], []
    for family, k in zip(("replace", "drop", "count", "item"), held_out):
        tasks = [t for t in TASKS if t.family == family]
        chosen = set(rng.choice(len(tasks), size=k, replace=False).tolist())
        held += [t for i, t in enumerate(tasks) if i in chosen]
        train += [t for i, t in enumerate(tasks) if i not in chosen]
    train.append(Task("reverse"))
    order = rng.permutation(len(train))
    return [train[i] for i in order], held, [t for t in TASKS if t.family == UNSEEN_FAMILY]


def spread_over_families(tasks, n):
    """n of `tasks`, chosen with the families taking turns: the first task of each family (in the order of
    `tasks`), then the second of each, and so on, a family dropping out when it has no more; returned in their
    order in `tasks` (so n = len(tasks) gives `tasks` itself). A run on few tasks then covers as many families as
    it can, and what it fails to follow is not only what it never saw a word of."""
    if not 0 <= n <= len(tasks):
        raise ValueError(f"n must be between 0 and {len(tasks)}, got {n}")
    turn, seen = {}, {}
    for i, task in enumerate(tasks):  # the k-th task of its family takes turn k
        turn[i] = seen[task.family] = seen.get(task.family, -1) + 1
    chosen = set(sorted(turn, key=lambda i: (turn[i], list(seen).index(tasks[i].family)))[:n])
    return [task for i, task in enumerate(tasks) if i in chosen]


def verbose(answer):
    """The long version of a right answer: the same answer, then chatter, then the end."""
    return answer[:-1] + CHATTER + END


def corrupt(answer, rng):
    """A wrong answer of the same form: one character of the output changed."""
    body = answer[:-1]
    i = int(rng.integers(len(body)))
    pool = "0123456789" if body[i].isdigit() else LETTERS
    wrong = rng.choice([c for c in pool if c != body[i]])
    return body[:i] + wrong + body[i + 1:] + END


def instruction_examples(tasks, n, rng, phrasings=1, p_verbose=0.0):
    """n (prompt, answer) pairs, each of a task drawn uniformly from `tasks`.

    prompt: "instruction: input="; answer: "output." The instruction uses one of the first
    `phrasings` phrasings of its family, drawn at random. p_verbose: the share of answers
    written long (chatty training data, as people write it).
    """
    out = []
    for _ in range(n):
        task = tasks[int(rng.integers(len(tasks)))]
        x = task.draw_input(rng)
        answer = task.solve(x) + END
        if rng.random() < p_verbose:
            answer = verbose(answer)
        out.append((f"{task.instruction(int(rng.integers(phrasings)))}: {x}=", answer))
    return out


def answer_score(answer, target):
    """The preference rule: 2 if `answer` is the target ("bbcb."), 1 if it is the target with words after
    it ("bbcb ok ok."), 0 otherwise (wrong, or never ended). Text after the first "." is ignored."""
    if END not in answer:
        return 0
    answer = answer[: answer.index(END) + 1]
    if answer == target:
        return 2
    return 1 if answer.startswith(target[:-1] + " ") else 0


def preference_pairs(tasks, n, rng):
    """n (prompt, chosen, rejected) triples: a third correct-short over correct-long, a third
    correct-short over wrong, a third correct-long over wrong (the rule 2 > 1 > 0)."""
    out = []
    for prompt, answer in instruction_examples(tasks, n, rng):
        kind = int(rng.integers(3))
        short, long, wrong = answer, verbose(answer), corrupt(answer, rng)
        out.append((prompt, *[(short, long), (short, wrong), (long, wrong)][kind]))
    return out


def encode(text):
    """Token ids of a string (one per character)."""
    return [_ID[c] for c in text]


def decode(ids):
    """The string of token ids, padding left out."""
    return "".join(VOCAB[i] for i in ids if i != PAD)


def encode_pairs(prompts, answers):
    """(tokens, answer_mask): int64 (B, T) ids of prompt + answer, right-padded with 0, and a bool (B, T)
    mask that is True on the answer's characters (the "." included), False on the prompt and padding."""
    rows = [encode(p + a) for p, a in zip(prompts, answers)]
    T = max(len(r) for r in rows)
    tokens = np.zeros((len(rows), T), dtype=np.int64)
    mask = np.zeros((len(rows), T), dtype=bool)
    for i, (row, p) in enumerate(zip(rows, prompts)):
        tokens[i, : len(row)] = row
        mask[i, len(p): len(row)] = True
    return tokens, mask
