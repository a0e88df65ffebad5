"""The held-out round of issue 32: attacks on grading and honest-but-unusual answers, measured.

Every submission below is a 03_attention notebook. They are graded as an instructor grades,
`plmcourse grade all` (collect, autograde with the bubblewrap sandbox and the judge, feedback,
export), and then the real gradebook, export, review table, feedback pages, grading report and
temp folder are read. Each attack comes with a wrong or missing answer, so that an attack that
works shows as points the student does not deserve; attacks on evidence, flags, output or
leftovers also say what must be true afterwards.

Six classes (issue 32, "Where it stands"):
  account  the judge believes the kernel's account of itself (calls, flag text)
  means    complete implementations reachable inside the sandbox
  oracle   hidden cases as an oracle
  live     what comes back out of the sandbox is live (scripts, handlers)
  stops    one submission stops the class or leaves things on the host
  flags    a flag that never reaches the instructor
and `honest`: unusual but correct answers, which keep full marks and raise no flag.

Run it against the code on PYTHONPATH (or the installed plmcourse), as a script so that the
`bench` package of another checkout is not in the way:

    cd /tmp && PYTHONPATH=/work/before /work/main/.venv/bin/python /work/main/bench/attacks.py

It prints one markdown table (student, class, deserved, got, verdict). `--split` grades the
submissions that may stop the class ("stops") each in a run of its own beside one honest
student, so that one of them stopping `grade all` does not hide what the others got.
tests/test_grading_hostile_kernel.py grades the same catalogue in one run and asserts it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

import plmcourse
from plmcourse.release import solved_release

ASSIGNMENT = "03_attention"
POINTS = {"softmax": 2, "scaled_dot_product_attention": 3, "causal_mask": 1, "multi_head_attention": 4}
FULL = sum(POINTS.values())
CELL_SECONDS = 10  # as the other catalogues: an endless loop costs little
ROOT = Path(__file__).resolve().parent.parent


def course_dir() -> Path:
    """The course that belongs to the plmcourse imported (a worktree's own), else this checkout's."""
    beside = Path(plmcourse.__file__).resolve().parent.parent / "course"
    return beside if (beside / "source" / ASSIGNMENT).is_dir() else ROOT / "course"


# ----------------------------------------------------------------------------
# Our own answers (not the course's): the base of every honest submission


MY_SOFTMAX = '''\
def softmax(x, axis=-1):
    x = np.moveaxis(np.asarray(x), axis, -1)           # work on the last axis
    peak = x.max(axis=-1, keepdims=True)
    peak[~np.isfinite(peak)] = 0                        # an all -inf slice: shift by 0, exp gives 0
    expo = np.exp(x - peak)
    norm = expo.sum(axis=-1, keepdims=True)
    norm[norm == 0] = 1                                 # zeros stay zeros
    return np.moveaxis(expo / norm, -1, axis)
'''

MY_SDPA = '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])                # a Python float keeps float32 float32
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) * scale
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)
    attn = softmax(logits)
    return np.matmul(attn, v), attn
'''

MY_CAUSAL = '''\
def causal_mask(n):
    return np.arange(n)[:, None] >= np.arange(n)
'''

MY_MHA = '''\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    batch, n_q, width = x_q.shape
    n_k = x_kv.shape[1]
    size = width // n_heads

    def split(t, length):
        return t.reshape(batch, length, n_heads, size).permute(0, 2, 1, 3)

    queries, keys, values = split(x_q @ w_q, n_q), split(x_kv @ w_k, n_k), split(x_kv @ w_v, n_k)
    logits = torch.matmul(queries, keys.transpose(-1, -2)) / size ** 0.5
    if mask is not None:
        logits = torch.where(mask, logits, torch.full_like(logits, float("-inf")))
    attn = torch.softmax(logits, dim=-1)
    attn = torch.where(torch.isnan(attn), torch.zeros_like(attn), attn)
    mixed = torch.matmul(attn, values).permute(0, 2, 1, 3).reshape(batch, n_q, width)
    return mixed @ w_o, attn
'''

MINE = {"softmax": MY_SOFTMAX, "scaled_dot_product_attention": MY_SDPA, "causal_mask": MY_CAUSAL,
        "multi_head_attention": MY_MHA}
NOT_IMPLEMENTED = "def causal_mask(n):\n    raise NotImplementedError()\n"


def release(**answers):
    """The release notebook with the course's answers, `answers` (by grade_id) swapped in."""
    return solved_release(course_dir(), ASSIGNMENT, **answers)


def partly(**answers):
    """The release notebook with only `answers` filled in: the other exercises left as handed out (an honest
    submission of our own that shares no answer with the others, so that no classmate flag can arise)."""
    nb = nbformat.read(course_dir() / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return nb


def mine(**answers):
    """The release notebook with our own answers, `answers` swapped in."""
    return release(**{**MINE, **answers})


def _index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def before_cell(nb, grade_id, *sources):
    """Ordinary code cells inserted just before the cell `grade_id`."""
    index = _index(nb, grade_id)
    nb.cells[index:index] = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def after_cell(nb, grade_id, *sources):
    """Ordinary code cells inserted just after the cell `grade_id` (an answer or a test)."""
    index = _index(nb, grade_id) + 1
    nb.cells[index:index] = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def markdown_after(nb, grade_id, source):
    nb.cells.insert(_index(nb, grade_id) + 1, nbformat.v4.new_markdown_cell(source))
    return nb


# ----------------------------------------------------------------------------
# Class 1, account: the judge believes the kernel's account of its calls

# A softmax by the library the exercise switches off (sealed: it scores 0 when the call is seen).
TORCH_SOFTMAX = '''\
import torch

def softmax(x, axis=-1):
    out = torch.softmax(torch.from_numpy(np.asarray(x)), axis).numpy()
    return np.nan_to_num(out, nan=0.0)          # an all -inf slice gives zeros
'''

# 1. The reply to the judge loses its `calls`: the kernel's copy of the grading code is patched,
# the module found through a name built at run time (no "plmcourse.grading" in the text).
CALLS_DROPPED = '''\
import importlib
_core = importlib.import_module("plmcourse." + "grad" + "ing.core")
_document = _core._reply_document

def _without_calls(reply):
    doc = _document(reply)
    doc["calls"] = []
    return doc

_core._reply_document = _without_calls
'''

# 2. The recorder blinded from inside the answer: the profiler hook switched off and torch's
# function modes disabled around the library call.
BLINDED_SOFTMAX = '''\
import sys, torch

def softmax(x, axis=-1):
    getattr(sys, "set" + "profile")(None)
    with torch._C.DisableTorchFunction():
        out = torch.softmax(torch.from_numpy(np.asarray(x)), axis).numpy()
    return np.nan_to_num(out, nan=0.0)
'''

# 3. The forbidden call made by a worker thread started in an earlier cell; the answer only
# hands the work over and waits.
WORKER = '''\
import queue, threading, torch
_jobs, _results = queue.Queue(), queue.Queue()

def _worker():
    while True:
        x, axis = _jobs.get()
        _results.put(np.nan_to_num(torch.softmax(torch.from_numpy(x), axis).numpy(), nan=0.0))

threading.Thread(target=_worker, daemon=True).start()
'''
WORKER_SOFTMAX = '''\
def softmax(x, axis=-1):
    _jobs.put((np.asarray(x), axis))
    return _results.get()
'''

# 4. Invented calls: a library name the judge reports, with a terminal escape, carriage return
# and line break that make the report print a flag for another student (h-threadpool-einsum).
FORGED_TEXT = ("torch:torch\\x1b[2J\\x1b[31m\\r\\nh-threadpool-einsum: flagged for review, copied the answer of "
               "f-classmate-a \\x07" + "X" * 300 + "._softmax")
FORGED_CALLS = f'''\
import importlib
_core = importlib.import_module("plmcourse." + "grad" + "ing.core")
_document = _core._reply_document

def _with_invented_calls(reply):
    doc = _document(reply)
    doc["calls"] = list(doc["calls"]) + ["{FORGED_TEXT}"]
    return doc

_core._reply_document = _with_invented_calls
'''

# ----------------------------------------------------------------------------
# Class 2, means: complete implementations inside the sandbox

# 5. A helper of the checks themselves (judging/attention.py) that is a complete softmax.
CHECK_HELPER = '''\
import importlib
_helpers = importlib.import_module("plmcourse." + "judging.attention")

def softmax(x, axis=-1):
    return _helpers._softmax_shifted_by(x, axis, np.max(x, axis=axis, keepdims=True))
'''

# 6. The judges' own log-softmax (judging.core.log_softmax), its name built at run time.
CORE_LOG_SOFTMAX = '''\
import importlib
_log = getattr(importlib.import_module("plmcourse." + "judging.core"), "log_" + "soft" + "max")

def softmax(x, axis=-1):
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.exp(_log(np.asarray(x), axis)), nan=0.0)
'''

# 7. A library only the base interpreter has (scipy), through its site-packages.
BASE_SCIPY = '''\
import sys, sysconfig
sys.path.append(f"{sys.base_prefix}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages")
from scipy.special import softmax as _library

def softmax(x, axis=-1):
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(_library(x, axis=axis), nan=0.0)
'''

# 8. Another notebook's reference that computes the same thing under another name:
# notebook 06's prefix-LM mask with an empty prefix is the causal mask.
OTHER_NOTEBOOK_MASK = '''\
import importlib
_bart = importlib.import_module("plmcourse." + "ref.bart")

def causal_mask(n):
    return _bart.prefix_lm_mask(n, 0)
'''

# 8b. The same kind of reference reached by a plain import, as a student would write it.
PLAIN_PREFIX_MASK = '''\
from plmcourse.ref.bart import prefix_lm_mask

def causal_mask(n):
    return prefix_lm_mask(n, 0)          # notebook 06: an empty prefix is the causal mask
'''
PLAIN_REF_LOG_SOFTMAX = '''\
from plmcourse.ref.word_vectors import log_softmax as notebook_01_log_softmax

def softmax(x, axis=-1):
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.exp(notebook_01_log_softmax(np.asarray(x), axis)), nan=0.0)
'''

# ----------------------------------------------------------------------------
# Class 3, oracle: hidden cases run as often as one likes; the last run counts

# 9. The causal mask learnt from the judge's failure messages, one entry per run, in several
# cells (each under the cell time limit), after the test cell failed.
LEARN_FROM_MESSAGES = '''\
import re, time
from plmcourse.grading import check_causal_mask
try:
    learnt
except NameError:
    learnt, asked = {}, []

def probe(n):
    asked.append(n)
    return learnt.setdefault(n, np.zeros((n, n), dtype=bool)).copy()

stop, runs = time.monotonic() + 6, 0
while time.monotonic() < stop:
    runs += 1
    try:
        check_causal_mask(probe, hidden=True)
        print("learnt every hidden case after", runs, "runs"); break
    except AssertionError as failed:
        where = re.search(r"at \\[(\\d+), (\\d+)\\] \\(expected (True|False)", str(failed))
        if where is None:
            print("nothing to learn:", str(failed)[:200]); break
        i, j = int(where.group(1)), int(where.group(2))
        learnt[asked[-1]][i, j] = where.group(3) == "True"
print(runs, "runs,", sum(int(m.sum()) for m in learnt.values()), "entries learnt; sizes learnt:",
      sorted(n for n, m in learnt.items() if m.any()))
'''

# 10. Try variants with hidden=True after the test cell failed: the first that passes is the
# last run, and the last run counts.
TRY_VARIANTS = '''\
from plmcourse.grading import check_causal_mask
for k in (1, -1, 0):
    variant = lambda n, k=k: np.tril(np.ones((n, n), dtype=bool), k=k)
    try:
        check_causal_mask(variant, hidden=True)
        print("variant", k, "passes"); break
    except AssertionError:
        print("variant", k, "fails")
'''
TRIU_CAUSAL = "def causal_mask(n):\n    return np.triu(np.ones((n, n), dtype=bool))\n"

# ----------------------------------------------------------------------------
# Class 4, live: scripts and handlers in what the instructor opens

MARKER = "PWNED"  # every payload names it; none of it may stay live
MARKDOWN_SCRIPT = (f'Notes.\n\n<script>window.{MARKER}_MD = 1</script>\n\n'
                   f'<img src="x" onerror="window.{MARKER}_IMG = 1">\n\n'
                   f'<a href="javascript:window.{MARKER}_LINK = 1">my notes</a>\n')
JAVASCRIPT_OUTPUT = f'''\
from IPython.display import display
display({{"application/javascript": "window.{MARKER}_JS = 1", "text/plain": "js"}}, raw=True)
display({{"text/html": '<a href="javascript:window.{MARKER}_HREF = 1">see</a><iframe srcdoc="<script>window.{MARKER}_FRAME = 1</script>"></iframe>',
          "text/plain": "html"}}, raw=True)
'''
SVG_OUTPUT = f'''\
from IPython.display import display
display({{"image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" onload="window.{MARKER}_SVG = 1"><script>window.{MARKER}_SVGS = 1</script></svg>',
          "text/markdown": '<details open ontoggle="window.{MARKER}_MDOUT = 1">x</details>',
          "text/plain": "svg"}}, raw=True)
'''
# What may not stay in a view: a script, an event handler, a frame or a javascript: URL that carries
# the marker, as real markup (the same text escaped, as a code cell shows it, is inert).
LIVE = re.compile(r"<script\b[^>]*>[^<]*" + MARKER
                  + r"|<[a-z][^<>]*\son[a-z]+\s*=\s*[\"']?[^\"'<>]*" + MARKER
                  + r"|<[a-z][^<>]*\s(?:href|src|action|formaction|xlink:href|data)\s*=\s*[\"']?\s*javascript:[^\"'<>]*"
                  + MARKER + r"|<iframe\b[^>]*" + MARKER, re.I)

# ----------------------------------------------------------------------------
# Class 5, stops: one submission stops the class or leaves things behind

UNARY_BOMB = "x = " + "-" * 200_000 + "1\n"
BINOP_CHAIN = "def unused(x):\n    return x" + " + x" * 3000 + "\n"  # just past the parser's limit

# The kernel's socket folder is the one writable place it shares with the host.
FIND_SOCKETS = '''\
import json, os, sys

def socket_folder():
    if "-f" in sys.argv:
        try:
            with open(sys.argv[sys.argv.index("-f") + 1]) as f:
                return os.path.dirname(json.load(f)["ip"])
        except (OSError, ValueError, KeyError):
            pass
    return None

where = socket_folder()
print("socket folder:", where)
'''
DEEP_TREE = FIND_SOCKETS + '''\
if where:
    try:
        fd = os.open(where, os.O_RDONLY)
        os.mkdir("deep", dir_fd=fd)
        for _ in range(5000):                          # deeper than PATH_MAX: only fd-relative
            inner = os.open("deep" if _ == 0 else "d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
            os.mkdir("d", dir_fd=fd)
        os.close(fd)
        os.mkdir(os.path.join(where, "odd\\nname\\x1b[31m"))
        os.symlink("/", os.path.join(where, "root-link"))
        locked = os.path.join(where, "locked")
        os.makedirs(os.path.join(locked, "inside"))
        os.chmod(locked, 0)
        print("planted a tree 5000 folders deep, odd names, a link and a locked folder")
    except OSError as err:
        print("could not plant:", err)
'''
FILL_SOCKETS = FIND_SOCKETS + '''\
written = 0
if where:
    block = b"\\0" * (1 << 20)
    try:
        for n in range(3):
            with open(os.path.join(where, f"fill{n}.bin"), "wb") as f:
                for _ in range(200):
                    f.write(block)
                    written += 1
    except OSError as err:
        print("stopped:", err)
print(f"socket folder: wrote {written} MB")
'''
FILL_TRIED_MB = 600

# ----------------------------------------------------------------------------
# Class 6, flags: a flag that never reaches the instructor

SPECIAL_LOG_SOFTMAX = '''\
import torch

def softmax(x, axis=-1):
    logp = torch.special.log_softmax(torch.from_numpy(np.asarray(x)), axis)
    return np.nan_to_num(torch.exp(logp).numpy(), nan=0.0)
'''

# The course's ref.softmax, disguised: renamed, statements reordered, a helper inlined, dead code.
COURSE_COPY = '''\
def softmax(x, axis=-1):
    unused_counter = 0
    arr = np.asarray(x)
    if unused_counter > 1:
        print("never")
    biggest = np.max(arr, axis=axis, keepdims=True)
    biggest = np.where(np.isfinite(biggest), biggest, 0.0)
    exps = np.exp(arr - biggest)
    denom = np.sum(exps, axis=axis, keepdims=True)
    unused_counter += 1
    return np.divide(exps, denom, out=np.zeros_like(exps), where=denom > 0)
'''

# Two classmates, one multi-head attention: the second renamed and reordered.
CLASSMATE_MHA = '''\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    nb, lq, dm = x_q.shape
    lk = x_kv.shape[1]
    hd = dm // n_heads
    qh = (x_q @ w_q).reshape(nb, lq, n_heads, hd).permute(0, 2, 1, 3).contiguous()
    kh = (x_kv @ w_k).reshape(nb, lk, n_heads, hd).permute(0, 2, 3, 1).contiguous()
    vh = (x_kv @ w_v).reshape(nb, lk, n_heads, hd).permute(0, 2, 1, 3).contiguous()
    sc = torch.matmul(qh, kh) * (1.0 / math.sqrt(hd))
    if mask is not None:
        sc = sc.masked_fill(torch.logical_not(mask), -math.inf)
    pr = torch.softmax(sc, -1)
    pr = torch.nan_to_num(pr, nan=0.0)
    ctx = torch.matmul(pr, vh).permute(0, 2, 1, 3).contiguous().reshape(nb, lq, dm)
    return torch.matmul(ctx, w_o), pr
'''
CLASSMATE_MHA_RENAMED = '''\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    batch, q_len, d_model = x_q.shape
    head_dim = d_model // n_heads
    k_len = x_kv.shape[1]
    values = (x_kv @ w_v).reshape(batch, k_len, n_heads, head_dim).permute(0, 2, 1, 3).contiguous()
    queries = (x_q @ w_q).reshape(batch, q_len, n_heads, head_dim).permute(0, 2, 1, 3).contiguous()
    keys_t = (x_kv @ w_k).reshape(batch, k_len, n_heads, head_dim).permute(0, 2, 3, 1).contiguous()
    scores = torch.matmul(queries, keys_t) * (1.0 / math.sqrt(head_dim))
    if mask is not None:
        scores = scores.masked_fill(torch.logical_not(mask), -math.inf)
    probs = torch.nan_to_num(torch.softmax(scores, -1), nan=0.0)
    context = torch.matmul(probs, values).permute(0, 2, 1, 3).contiguous().reshape(batch, q_len, d_model)
    return torch.matmul(context, w_o), probs
'''

# ----------------------------------------------------------------------------
# Honest but unusual: full marks, no flag. Each honest student below has code of its own for
# every long exercise (softmax, attention, multi-head attention): identical code in two
# submissions is rightly a classmates flag, so the catalogue must not share any.

# h-threadpool-einsum: a thread pool, np.einsum, as_strided, torch.bmm.
THREADPOOL_SOFTMAX = '''\
from concurrent.futures import ThreadPoolExecutor

def _one_row(row):
    top = row.max()
    if np.isneginf(top):
        return np.zeros_like(row)
    e = np.exp(row - top)
    return e / e.sum()

def softmax(x, axis=-1):
    moved = np.moveaxis(np.asarray(x), axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(_one_row, rows))
    out = np.stack(done).reshape(moved.shape) if done else np.zeros_like(moved)
    return np.moveaxis(out, -1, axis)
'''
EINSUM_SDPA = '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    logits = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)
    attn = softmax(logits, axis=-1)
    return np.einsum("...qk,...kd->...qd", attn, v), attn
'''
STRIDED_CAUSAL = '''\
def causal_mask(n):
    # Row i is a window of [n ones, n-1 zeros] that starts n-1-i entries in: as_strided
    # walks the rows backwards (a negative stride), so no loop is needed.
    ones_then_zeros = np.concatenate([np.ones(n, dtype=bool), np.zeros(max(n - 1, 0), dtype=bool)])
    step = ones_then_zeros.strides[0]
    rows = np.lib.stride_tricks.as_strided(ones_then_zeros[n - 1:], shape=(n, n), strides=(-step, step))
    return rows.copy()
'''
BMM_MHA = '''\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, Lq, D = x_q.shape
    Lk = x_kv.shape[1]
    dk = D // n_heads

    def fold(t, L):  # (B, L, D) -> (B * heads, L, dk)
        return t.view(B, L, n_heads, dk).transpose(1, 2).reshape(B * n_heads, L, dk)

    q, k, v = fold(x_q @ w_q, Lq), fold(x_kv @ w_k, Lk), fold(x_kv @ w_v, Lk)
    scores = torch.bmm(q, k.transpose(1, 2)).view(B, n_heads, Lq, Lk) * dk ** -0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    mixed = torch.bmm(probs.reshape(B * n_heads, Lq, Lk), v)
    return mixed.view(B, n_heads, Lq, dk).transpose(1, 2).reshape(B, Lq, D) @ w_o, probs
'''

# h-jit-unicode: unicode names, torch.jit.script, np.tri.
UNICODE_SOFTMAX = '''\
def softmax(x, axis=-1):
    μ = np.max(x, axis=axis, keepdims=True)
    ŷ = np.exp(x - np.nan_to_num(μ, neginf=0.0))
    Σ = np.add.reduce(ŷ, axis=axis, keepdims=True)
    return np.where(Σ > 0, ŷ / np.maximum(Σ, np.finfo(ŷ.dtype).tiny), 0).astype(ŷ.dtype)
'''
UNICODE_SDPA = '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    ŝ = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    allowed = np.ones(ŝ.shape, dtype=bool) if mask is None else np.broadcast_to(mask, ŝ.shape)
    top = np.max(np.where(allowed, ŝ, -np.inf), axis=-1, keepdims=True)
    ε = np.exp(np.where(allowed, ŝ - np.where(np.isfinite(top), top, 0), -np.inf))
    ζ = ε.sum(axis=-1, keepdims=True)
    ω = ε / np.where(ζ == 0, 1, ζ)
    return ω @ v, ω
'''
TRI_CAUSAL = "def causal_mask(n):\n    return np.tri(n, dtype=bool)\n"
JIT_MHA = '''\
from typing import Optional, Tuple


@torch.jit.script
def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            mask: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    logits = torch.matmul(q, k.transpose(-1, -2)) / float(q.shape[-1]) ** 0.5
    if mask is not None:
        logits = logits.masked_fill(mask.logical_not(), float("-inf"))
    attn = torch.softmax(logits, dim=-1)
    attn = torch.where(torch.isnan(attn), torch.zeros_like(attn), attn)
    return torch.matmul(attn, v), attn


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, lq, dm = x_q.shape
    lk = x_kv.shape[1]
    q = (x_q @ w_q).view(b, lq, n_heads, dm // n_heads).transpose(1, 2)
    k = (x_kv @ w_k).view(b, lk, n_heads, dm // n_heads).transpose(1, 2)
    v = (x_kv @ w_v).view(b, lk, n_heads, dm // n_heads).transpose(1, 2)
    out, attn = _attend(q, k, v, mask)
    return out.transpose(1, 2).reshape(b, lq, dm) @ w_o, attn
'''

# h-callable-printing: a class with __call__, heavy printing, np.fromfunction, torch.einsum.
PRINTING = '''\
for i in range(5000):
    print(f"line {i}: thinking out loud about softmax")
'''
CALLABLE_SOFTMAX = '''\
class Softmax:
    """A softmax object: configured once, called like a function (and chatty about it)."""

    def __init__(self, default_axis=-1):
        self.default_axis = default_axis

    def __call__(self, x, axis=None):
        for i in range(200):
            print("softmax called on shape", np.shape(x), "line", i)
        axis = self.default_axis if axis is None else axis
        shift = np.max(x, axis=axis, keepdims=True)
        shift[np.isneginf(shift)] = 0
        e = np.exp(x - shift)
        s = np.sum(e, axis=axis, keepdims=True)
        return np.where(s > 0, e / np.where(s > 0, s, 1), 0).astype(e.dtype)


softmax = Softmax()
'''
MOVEAXIS_SDPA = '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    raw = np.matmul(q, np.moveaxis(k, -1, -2)) * q.shape[-1] ** -0.5
    if mask is not None:
        raw = raw.copy()
        raw[~np.broadcast_to(mask, raw.shape)] = -np.inf
    probs = softmax(raw, axis=-1)
    out = np.matmul(probs, v)
    return out, probs
'''
FROMFUNCTION_CAUSAL = "def causal_mask(n):\n    return np.fromfunction(lambda i, j: j <= i, (n, n), dtype=int)\n"
EINSUM_MHA = '''\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, lq, d = x_q.shape
    lk, h = x_kv.shape[1], n_heads
    q = torch.einsum("bld,de->ble", x_q, w_q).reshape(b, lq, h, d // h)
    k = torch.einsum("bld,de->ble", x_kv, w_k).reshape(b, lk, h, d // h)
    v = torch.einsum("bld,de->ble", x_kv, w_v).reshape(b, lk, h, d // h)
    logits = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(d // h)
    if mask is not None:
        logits = logits.masked_fill(~mask.bool(), float("-inf"))
    weights = torch.softmax(logits, -1)
    weights = weights.masked_fill(weights.isnan(), 0.0)
    out = torch.einsum("bhqk,bkhe->bqhe", weights, v).reshape(b, lq, d)
    return torch.einsum("bld,de->ble", out, w_o), weights
'''

# h-cache-helper: a dict cache, functools.lru_cache, a helper from an earlier cell, a loop over heads.
SOFTMAX_CACHE = "_softmax_cache = {}  # filled by softmax\n"
CACHED_SOFTMAX = '''\
def softmax(x, axis=-1):
    x = np.asarray(x)
    key = (x.tobytes(), x.shape, x.dtype.str, axis)
    if key not in _softmax_cache:
        top = np.max(x, axis=axis, keepdims=True)
        top = np.where(np.isneginf(top), 0, top)
        e = np.exp(x - top)
        s = e.sum(axis=axis, keepdims=True)
        _softmax_cache[key] = e / np.where(s == 0, 1, s)
    return _softmax_cache[key].copy()
'''
CACHED_CAUSAL = '''\
import functools


@functools.lru_cache(maxsize=None)
def _causal(n):
    return np.tril(np.ones((n, n), dtype=bool))


def causal_mask(n):
    return _causal(n).copy()
'''
HELPER = '''\
def attention_scores(q, k):
    """q kᵀ / √d_k over the last two axes."""
    return np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(k.shape[-1])
'''
HELPER_SDPA = '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    w = softmax(np.where(True if mask is None else mask, attention_scores(q, k), -np.inf), axis=-1)
    return w @ v, w
'''
LOOP_MHA = '''\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_head = d_model // n_heads
    Q, K, V = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    full = None if mask is None else torch.broadcast_to(mask, (B, n_heads, L_q, L_k))
    outputs, all_weights = [], []
    for head in range(n_heads):
        cols = slice(head * d_head, (head + 1) * d_head)
        s = Q[..., cols] @ K[..., cols].transpose(-1, -2) / d_head ** 0.5      # (B, L_q, L_k)
        if full is not None:
            s = s.masked_fill(~full[:, head], float("-inf"))
        w = torch.softmax(s, dim=-1)
        w = torch.where(w.isnan(), torch.zeros_like(w), w)
        outputs.append(w @ V[..., cols])
        all_weights.append(w)
    return torch.cat(outputs, dim=-1) @ w_o, torch.stack(all_weights, dim=1)
'''

# ----------------------------------------------------------------------------
# The catalogue


@dataclass
class Submission:
    name: str
    kind: str                 # account, means, oracle, live, stops, flags, honest
    make: object              # () -> notebook
    lost: tuple = ()          # the exercises it deserves 0 for
    how: str = ""             # the mechanism, in a few words
    after: tuple = ()         # names of the conditions in AFTERWARDS that must hold
    may_stop: bool = False    # graded alone beside one honest student with --split
    flagged: tuple = ()       # exercises on which a person must be asked to look (class 6)

    @property
    def deserved(self):
        return sum(p for e, p in POINTS.items() if e not in self.lost)


BROKEN_SOFTMAX = ("softmax", "scaled_dot_product_attention")  # attention's answer calls the student's softmax

CATALOGUE = [
    # 1 account
    Submission("k-reply-calls-dropped", "account", lambda: before_cell(release(softmax=TORCH_SOFTMAX), "softmax",
                                                                       CALLS_DROPPED),
               ("softmax",), "the kernel's reply to the judge loses its list of calls (patched _reply_document)"),
    Submission("k-recorder-blinded", "account", lambda: release(softmax=BLINDED_SOFTMAX), ("softmax",),
               "the answer switches the profiler off and disables torch function modes around torch.softmax"),
    Submission("k-worker-thread", "account", lambda: before_cell(release(softmax=WORKER_SOFTMAX), "softmax",
                                                                 WORKER), ("softmax",),
               "torch.softmax runs in a worker thread started in an earlier cell"),
    Submission("k-forged-flag-text", "account", lambda: before_cell(release(), "softmax", FORGED_CALLS), (),
               "invented calls with escapes and a line break that frame h-threadpool-einsum",
               after=("no_forged_lines", "printable_flags")),
    # 2 means
    Submission("m-check-helper", "means", lambda: release(softmax=CHECK_HELPER), BROKEN_SOFTMAX,
               "softmax is judging.attention._softmax_shifted_by (a mistake helper of the check)"),
    Submission("m-core-log-softmax", "means", lambda: release(softmax=CORE_LOG_SOFTMAX), BROKEN_SOFTMAX,
               "softmax is exp of judging.core.log_softmax, its name built at run time"),
    Submission("m-base-scipy", "means", lambda: release(softmax=BASE_SCIPY), BROKEN_SOFTMAX,
               "scipy.special.softmax from the base interpreter's site-packages"),
    Submission("m-other-notebook-mask", "means", lambda: release(causal_mask=OTHER_NOTEBOOK_MASK), ("causal_mask",),
               "causal_mask is notebook 06's ref.bart.prefix_lm_mask(n, 0)"),
    Submission("m-prefix-mask-plain", "means", lambda: release(causal_mask=PLAIN_PREFIX_MASK), ("causal_mask",),
               "causal_mask is notebook 06's prefix_lm_mask(n, 0), imported plainly"),
    Submission("m-ref-log-softmax-plain", "means", lambda: release(softmax=PLAIN_REF_LOG_SOFTMAX), BROKEN_SOFTMAX,
               "softmax is exp of notebook 01's ref.log_softmax, imported plainly"),
    # 3 oracle
    Submission("o-learn-from-messages", "oracle",
               lambda: after_cell(release(causal_mask=NOT_IMPLEMENTED), "test_causal_mask",
                                  *[LEARN_FROM_MESSAGES] * 5), ("causal_mask",),
               "the hidden causal cases learnt entry by entry from failure messages, last run counts",
               after=("hidden_values_kept",)),
    Submission("o-try-variants", "oracle",
               lambda: after_cell(release(causal_mask=TRIU_CAUSAL), "test_causal_mask", TRY_VARIANTS),
               ("causal_mask",), "variants tried with hidden=True after the test failed, last run counts"),
    # 4 live
    Submission("l-markdown-script", "live",
               lambda: markdown_after(release(causal_mask=NOT_IMPLEMENTED), "softmax", MARKDOWN_SCRIPT),
               ("causal_mask",), "<script>, onerror and javascript: in a markdown cell", after=("inert",)),
    Submission("l-javascript-output", "live",
               lambda: after_cell(release(causal_mask=NOT_IMPLEMENTED), "softmax", JAVASCRIPT_OUTPUT),
               ("causal_mask",), "an application/javascript output, an iframe srcdoc and a javascript: link",
               after=("inert",)),
    Submission("l-svg-output", "live",
               lambda: after_cell(release(causal_mask=NOT_IMPLEMENTED), "softmax", SVG_OUTPUT),
               ("causal_mask",), "an SVG output with onload and <script>, a markdown output with ontoggle",
               after=("inert",)),
    # 5 stops
    Submission("s-unary-bomb", "stops",
               lambda: after_cell(release(causal_mask=NOT_IMPLEMENTED), "softmax", UNARY_BOMB), ("causal_mask",),
               "a cell of 200,000 chained unary minuses (the grader's ast.parse: MemoryError)",
               after=("class_finished",), may_stop=True),
    Submission("s-binop-chain", "stops",
               lambda: after_cell(release(causal_mask=NOT_IMPLEMENTED), "softmax", BINOP_CHAIN), ("causal_mask",),
               "a function returning x + x + ... 3,000 terms (ast construction: RecursionError)",
               after=("class_finished",), may_stop=True),
    Submission("s-deep-tree", "stops",
               lambda: after_cell(release(causal_mask=NOT_IMPLEMENTED), "softmax", DEEP_TREE), ("causal_mask",),
               "a tree 5,000 folders deep, a newline name, a link and a locked folder in the socket folder",
               after=("class_finished", "nothing_left"), may_stop=True),
    Submission("s-socket-fill", "stops",
               lambda: after_cell(release(causal_mask=NOT_IMPLEMENTED), "softmax", FILL_SOCKETS), ("causal_mask",),
               f"{FILL_TRIED_MB} MB written into the kernel's socket folder on the host",
               after=("socket_capped", "nothing_left")),
    # 6 flags
    Submission("f-special-log-softmax", "flags", lambda: release(softmax=SPECIAL_LOG_SOFTMAX), ("softmax",),
               "a library softmax the seal misses (torch.special.log_softmax; the exercise forbids library softmaxes)",
               after=("flag_reaches_instructor",), flagged=("softmax",)),
    Submission("f-course-copy", "flags", lambda: release(softmax=COURSE_COPY), (),
               "the course's softmax renamed, reordered, with dead code", after=("flag_reaches_instructor",),
               flagged=("softmax",)),
    Submission("f-classmate-a", "flags", lambda: release(multi_head_attention=CLASSMATE_MHA), (),
               "the same multi-head attention as f-classmate-b", after=("classmates_flagged",),
               flagged=("multi_head_attention",)),
    Submission("f-classmate-b", "flags", lambda: release(multi_head_attention=CLASSMATE_MHA_RENAMED), (),
               "f-classmate-a's multi-head attention renamed and reordered", after=("classmates_flagged",),
               flagged=("multi_head_attention",)),
    # honest but unusual
    Submission("h-plain", "honest", lambda: mine(), (), "our own answers", after=("no_flag",)),
    Submission("h-threadpool-einsum", "honest",
               lambda: mine(softmax=THREADPOOL_SOFTMAX, scaled_dot_product_attention=EINSUM_SDPA,
                            causal_mask=STRIDED_CAUSAL, multi_head_attention=BMM_MHA), (),
               "softmax row by row in a ThreadPoolExecutor, attention by np.einsum, the mask by as_strided, "
               "multi-head attention by torch.bmm", after=("no_flag",)),
    Submission("h-jit-unicode", "honest",
               lambda: mine(softmax=UNICODE_SOFTMAX, scaled_dot_product_attention=UNICODE_SDPA,
                            causal_mask=TRI_CAUSAL, multi_head_attention=JIT_MHA), (),
               "unicode names (μ, Σ, ŝ, ω), multi-head attention through a torch.jit.script function",
               after=("no_flag",)),
    Submission("h-callable-printing", "honest",
               lambda: before_cell(mine(softmax=CALLABLE_SOFTMAX, scaled_dot_product_attention=MOVEAXIS_SDPA,
                                        causal_mask=FROMFUNCTION_CAUSAL, multi_head_attention=EINSUM_MHA),
                                   "softmax", PRINTING), (),
               "softmax is an object with __call__ that prints 200 lines a call, 5,000 more printed lines, "
               "torch.einsum", after=("no_flag",)),
    Submission("h-cache-helper", "honest",
               lambda: before_cell(mine(softmax=CACHED_SOFTMAX, scaled_dot_product_attention=HELPER_SDPA,
                                        causal_mask=CACHED_CAUSAL, multi_head_attention=LOOP_MHA),
                                   "softmax", SOFTMAX_CACHE, HELPER), (),
               "a dict cache, functools.lru_cache, attention through a helper from an earlier cell, a loop over heads",
               after=("no_flag",)),
]
# ----------------------------------------------------------------------------
# Issue 43's round: the routes a deny-list cannot list (other processes, native code, packages the
# notebooks do not need, the kernel's own folders), host resources outside the caps, and honest answers
# that use what the policy must leave alone. Written before the policy; measured before and after it.

# 1. torch.softmax in a child Python started with subprocess: neither the recorder nor the reader sees it.
SUBPROCESS_SOFTMAX = """\
import json, subprocess, sys

_CHILD = ("import json, sys, numpy as np, torch; d = json.load(sys.stdin); "
          "print(json.dumps(torch.from_numpy(np.array(d['x'])).softmax(d['axis']).tolist()))")

def softmax(x, axis=-1):
    x = np.asarray(x)
    out = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps({"x": x.tolist(), "axis": axis}),
                         capture_output=True, text=True).stdout
    return np.nan_to_num(np.array(json.loads(out), dtype=x.dtype).reshape(x.shape), nan=0.0)
"""

# 2. The same through os.popen's shell, the input in a file in the working folder.
POPEN_SOFTMAX = """\
import os, sys

def softmax(x, axis=-1):
    x = np.ascontiguousarray(x)
    np.save("in.npy", x)
    os.popen(f"{sys.executable} -c \\"import numpy as np, torch; x = np.load('in.npy'); "
             f"np.save('out.npy', torch.from_numpy(x).softmax({axis}).numpy())\\"").read()
    return np.nan_to_num(np.load("out.npy"), nan=0.0)
"""

# 3. A fork: the child computes with torch.softmax and writes the bytes to a pipe.
FORK_SOFTMAX = """\
import os

def softmax(x, axis=-1):
    x = np.ascontiguousarray(x)
    read, write = os.pipe()
    if os.fork() == 0:
        import torch
        os.write(write, torch.from_numpy(x).softmax(axis).numpy().tobytes())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 20):
        data += chunk
    os.close(read)
    os.wait()
    return np.nan_to_num(np.frombuffer(data, dtype=x.dtype).reshape(x.shape), nan=0.0)
"""

# 4. A multiprocessing pool (fork context), the worker defined in the answer cell.
POOL_SOFTMAX = """\
import multiprocessing

def _worker(job):
    import torch
    x, axis = job
    return torch.from_numpy(x).softmax(axis).numpy()

def softmax(x, axis=-1):
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return np.nan_to_num(pool.map(_worker, [(np.ascontiguousarray(x), axis)])[0], nan=0.0)
"""

# 5. A process pool of concurrent.futures (spawn: the worker is a module the answer writes to /tmp).
SPAWN_POOL_SOFTMAX = """\
import concurrent.futures, multiprocessing, sys

with open("/tmp/spawned_worker.py", "w") as f:
    f.write("import torch\\ndef work(x, axis):\\n    return torch.from_numpy(x).softmax(axis).numpy()\\n")
sys.path.insert(0, "/tmp")
import spawned_worker

def softmax(x, axis=-1):
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return np.nan_to_num(pool.submit(spawned_worker.work, np.ascontiguousarray(x), axis).result(), nan=0.0)
"""

# 6. ctypes: the profiler (the recorder) switched off from C, where sys.setprofile is not called.
CTYPES_BLIND_SOFTMAX = """\
import ctypes

def softmax(x, axis=-1):
    ctypes.pythonapi.PyEval_SetProfile(None, None)
    return np.nan_to_num(torch.from_numpy(np.asarray(x)).softmax(axis).numpy(), nan=0.0)
"""

# 7. A package the notebooks do not need (a test extra), reached through importlib and vars(): no import
#    statement, no attribute named softmax, no computed getattr.
EXTRA_VARS_SOFTMAX = """\
import importlib

_tc = importlib.import_module("transformers.pipelines." + "text_classification")
_f = vars(_tc)["soft" + "max"]

def softmax(x, axis=-1):
    x = np.moveaxis(np.asarray(x), axis, -1)
    with np.errstate(invalid="ignore"):
        out = np.nan_to_num(_f(x), nan=0.0)
    return np.moveaxis(out, -1, axis)
"""

# 8. The same package's source, read from disk and run.
EXTRA_SOURCE_SOFTMAX = """\
import os, re, sys

_site = next(p for p in sys.path if p.endswith("site-packages"))
_text = open(os.path.join(_site, "transformers", "pipelines", "text_classification.py")).read()
_space = {"np": np}
exec(re.search(r"def softmax\\(.*?(?=\\n\\n)", _text, re.S).group(0), _space)

def softmax(x, axis=-1):
    x = np.moveaxis(np.asarray(x), axis, -1)
    with np.errstate(invalid="ignore"):
        out = np.nan_to_num(_space["softmax"](x), nan=0.0)
    return np.moveaxis(out, -1, axis)
"""

# 9. A module planted in the kernel's working folder under a standard library name that is not loaded yet.
PLANTED_MODULE_SOFTMAX = """\
import sys

with open("colorsys.py", "w") as f:
    f.write("import torch\\ndef softmax(x, axis):\\n    return torch.from_numpy(x).softmax(axis).numpy()\\n")
sys.path.insert(0, ".")
import colorsys

def softmax(x, axis=-1):
    return np.nan_to_num(colorsys.softmax(np.asarray(x), axis), nan=0.0)
"""

# 10-12. Host resources: memory held where the data-segment ceiling does not count it (a memory file, SysV
#        shared memory), and a cell's output tens of megabytes large.
MEMFD_HOLD = """\
import mmap, os
held = []
try:
    fd = os.memfd_create("held")
    os.ftruncate(fd, 64 << 20)
    held.append(mmap.mmap(fd, 64 << 20))
    held[0][::4096] = b"x" * len(held[0][::4096])
except OSError as error:
    print(error)
"""
SHM_HOLD = """\
import ctypes
try:
    libc = ctypes.CDLL(None, use_errno=True)
    segment = libc.shmget(0, 64 << 20, 0o1600)
except Exception as error:
    print(error)
"""
HUGE_OUTPUT = """\
print("x" * (40 << 20))
"""
# 13. A shell command run for its side effect, in an earlier cell.
SYSTEM_CALL = """\
import os
os.system("echo ran > /tmp/ran.txt")
"""

# Honest answers the policy must leave alone: a standard-library module loaded only now, a progress bar,
# NumPy's typing module, an optional import of a package that is not installed.
LAZY_STDLIB_SOFTMAX = """\
import fractions, statistics

def softmax(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    total = np.sum(e, axis=axis, keepdims=True)
    assert fractions.Fraction(1, 2) == statistics.mean([0, 1])
    return e / np.where(total == 0, 1, total)
"""
TQDM_CAUSAL = """\
from tqdm.auto import tqdm

def causal_mask(n):
    mask = np.zeros((n, n), dtype=bool)
    for i in tqdm(range(n), disable=True):
        mask[i, : i + 1] = True
    return mask
"""
TYPED_SDPA = """\
import numpy.typing as npt

def scaled_dot_product_attention(q: npt.NDArray, k: npt.NDArray, v: npt.NDArray, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
"""
OPTIONAL_IMPORT = """\
try:
    import no_such_accelerator
except ImportError:
    no_such_accelerator = None
"""

POLICY_ROUND = [
    Submission("p-subprocess", "means", lambda: release(softmax=SUBPROCESS_SOFTMAX), BROKEN_SOFTMAX,
               "torch.softmax in a child Python started with subprocess", flagged=("softmax",)),
    Submission("p-popen", "means", lambda: release(softmax=POPEN_SOFTMAX), BROKEN_SOFTMAX,
               "torch.softmax in a child started by os.popen's shell, the data in files", flagged=("softmax",)),
    Submission("p-fork", "means", lambda: release(softmax=FORK_SOFTMAX), BROKEN_SOFTMAX,
               "torch.softmax in a forked child, the bytes through a pipe", flagged=("softmax",)),
    Submission("p-pool", "means", lambda: release(softmax=POOL_SOFTMAX), BROKEN_SOFTMAX,
               "torch.softmax in a multiprocessing pool's worker (fork)", flagged=("softmax",)),
    Submission("p-spawn-pool", "means", lambda: release(softmax=SPAWN_POOL_SOFTMAX), BROKEN_SOFTMAX,
               "torch.softmax in a spawned process pool, its module written to /tmp", flagged=("softmax",)),
    Submission("p-ctypes-blind", "account", lambda: release(softmax=CTYPES_BLIND_SOFTMAX), BROKEN_SOFTMAX,
               "the recorder switched off through ctypes (PyEval_SetProfile), then torch.softmax",
               flagged=("softmax",)),
    Submission("p-extra-vars", "means", lambda: release(softmax=EXTRA_VARS_SOFTMAX), BROKEN_SOFTMAX,
               "a test extra's NumPy softmax through importlib and vars() (transformers)"),
    Submission("p-extra-source", "means", lambda: release(softmax=EXTRA_SOURCE_SOFTMAX), BROKEN_SOFTMAX,
               "a test extra's softmax read from its file and run with exec"),
    Submission("p-planted-module", "means", lambda: release(softmax=PLANTED_MODULE_SOFTMAX), BROKEN_SOFTMAX,
               "a module planted in the working folder as colorsys, holding torch.softmax"),
    Submission("p-memfd", "stops", lambda: before_cell(release(), "softmax", MEMFD_HOLD), (),
               "64 MiB held in a memory file, outside the data-segment ceiling", flagged=("softmax",),
               after=("flag_reaches_instructor",)),
    Submission("p-sysv-shm", "stops", lambda: before_cell(release(), "softmax", SHM_HOLD), (),
               "SysV shared memory through ctypes, outside the data-segment ceiling", flagged=("softmax",),
               after=("flag_reaches_instructor",)),
    Submission("p-huge-output", "stops", lambda: before_cell(release(), "softmax", HUGE_OUTPUT), (),
               "a cell prints 40 MB", after=("output_capped",)),
    Submission("p-system", "stops", lambda: before_cell(release(), "softmax", SYSTEM_CALL), (),
               "os.system in an earlier cell", flagged=("softmax",), after=("flag_reaches_instructor",)),
    Submission("h-lazy-typed", "honest",
               lambda: partly(softmax=LAZY_STDLIB_SOFTMAX, scaled_dot_product_attention=TYPED_SDPA),
               ("causal_mask", "multi_head_attention"),
               "standard-library modules imported only in the answer, numpy.typing annotations (two exercises "
               "left as handed out)", after=("no_flag",)),
    Submission("h-progress-optional", "honest",
               lambda: before_cell(partly(causal_mask=TQDM_CAUSAL), "causal_mask", OPTIONAL_IMPORT),
               ("softmax", "scaled_dot_product_attention", "multi_head_attention"),
               "a tqdm loop, an optional import of a package that is not installed (three exercises left as "
               "handed out)", after=("no_flag",)),
]

CATALOGUE += POLICY_ROUND

# ----------------------------------------------------------------------------
# Issue 43's host-resource round, written before the caps it measures. Each attack cell runs after the
# last test cell (so the marks are the notebook's own), holds as much of one host resource as it can,
# and prints "held: N" as it goes (flushed), so that the autograded notebook keeps the most it held even
# when the kernel is stopped. HELD_AT_MOST is what a capped kernel can hold; OUTPUT attacks are judged
# by the grader's own peak memory and the notebook's size instead.

HELD = """\
import sys
def held(n):
    print("held:", int(n), flush=True)
"""
ANON_SHARED_MMAP = HELD + """\
import mmap
maps, chunk = [], b"\\1" * (16 << 20)
try:
    for _ in range(24):                                   # 6 GiB in 256 MiB pieces: MAP_SHARED, not data
        m = mmap.mmap(-1, 256 << 20)
        for _ in range(16):
            m.write(chunk)
        maps.append(m)
        held(len(maps) * 256)                             # MiB
except Exception as error:
    print("stopped:", type(error).__name__, error)
"""
def making_files(make: str, count: int, why: str, setup: str = "", every: int = 20_000, caught: str = "OSError") -> str:
    """An attack cell that runs `make` (a statement using i) `count` times, saying "held: N" every `every`."""
    return HELD + f"""\
import os
{setup}made = 0
try:
    for i in range({count}):                             # {why}
        {make}
        made += 1
        if made % {every} == 0:
            held(made)
except {caught} as error:
    print("stopped:", error)
held(made)
"""


MANY_DIRECTORIES = making_files('os.mkdir(f"/tmp/d{i}")', 400_000, "empty folders: no bytes, one inode each")
MANY_SYMLINKS = making_files('os.symlink("/nowhere/" + "x" * 200, f"l{i}")', 400_000,
                             "links in the working folder: an inode each")
MANY_HARD_LINKS = making_files('os.link("/dev/shm/one", f"/dev/shm/h{i}")', 400_000,
                               "names for one file: dentries, not bytes", setup='open("/dev/shm/one", "w").close()\n')
TORCH_SAVE_FILES = making_files('torch.save(t, f"/tmp/t{i}.pt")', 200_000, "files written by torch's C++ writer",
                                setup="import torch\nt = torch.zeros(1)\n", every=10_000, caught="Exception")
PIPE_BUFFERS = HELD + """\
import fcntl, os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
pipes, total = [], 0
try:
    for _ in range(20_000):                              # kernel memory: a pipe's buffer is not data
        r, w = os.pipe()
        os.set_blocking(w, False)
        fcntl.fcntl(w, 1031, 1 << 20)                    # F_SETPIPE_SZ
        try:
            while True:
                total += os.write(w, b"x" * 65536)
        except BlockingIOError:
            pass
        pipes.append((r, w))
        if len(pipes) % 200 == 0:
            held(total >> 20)                            # MiB
except OSError as error:
    print("stopped:", error)
held(total >> 20)
"""
SOCKET_BUFFERS = HELD + """\
import resource, socket
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
pairs, total = [], 0
try:
    for _ in range(20_000):                              # queued datagrams: kernel memory
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.setblocking(False)
        try:
            while True:
                total += a.send(b"x" * 60_000)
        except BlockingIOError:
            pass
        pairs.append((a, b))
        if len(pairs) % 200 == 0:
            held(total >> 20)                            # MiB
except OSError as error:
    print("stopped:", error)
held(total >> 20)
"""
THREAD_FLOOD = HELD + """\
import threading
threading.stack_size(64 * 1024)                          # small stacks: the data ceiling barely counts them
gate, threads = threading.Event(), []
try:
    for _ in range(30_000):                              # each holds a kernel stack and a task
        t = threading.Thread(target=gate.wait, daemon=True)
        t.start()
        threads.append(t)
        if len(threads) % 1000 == 0:
            held(len(threads))
except Exception as error:
    print("stopped:", type(error).__name__, error)
held(len(threads))
gate.set()
"""
EVENTFD_HOARD = HELD + """\
import os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds = []
try:
    for _ in range(2_000_000):                           # open files: kernel memory, no bytes
        fds.append(os.eventfd(0))
        if len(fds) % 50_000 == 0:
            held(len(fds))
except OSError as error:
    print("stopped:", error)
held(len(fds))
"""
STREAM_FLOOD = """\
import sys
chunk = "x" * (1 << 20)
for _ in range(1500):                                    # 1.5 GB, 1 MiB a write: each travels to the grader
    sys.stdout.write(chunk)
    sys.stdout.flush()
"""
FD_FLOOD = """\
import os
chunk = b"y" * (1 << 20)
for _ in range(1500):                                    # 1.5 GB below Python: the kernel's own stdout
    os.write(1, chunk)
"""
DISPLAY_FLOOD = """\
from IPython.display import HTML, display
for i in range(300_000):                                 # many small outputs: each one an object in the grader
    display(HTML(f"<b>{i}</b>"))
"""
HONEST_FILES = """\
import os, tempfile
import matplotlib.pyplot as plt
folder = tempfile.mkdtemp()
for i in range(300):                                     # a few hundred scratch files, as a student might
    with open(os.path.join(folder, f"note{i}.txt"), "w") as f:
        f.write(str(i))
plt.plot([0, 1], [1, 0]); plt.title("a figure saved to a file"); plt.savefig(os.path.join(folder, "fig.png"))
plt.close()
print(len(os.listdir(folder)), "files written")
"""

CUMSUM_CAUSAL = """\
def causal_mask(n):
    return np.cumsum(np.eye(n, dtype=int), axis=0) == 1       # row i: ones from the diagonal down
"""

LAST_TEST = "test_multi_head_attention"
HELD_AT_MOST = {  # what a kernel may hold at the caps (course/INSTRUCTORS.md), in the unit it prints
    "r-anon-shared-mmap": 0,              # MiB: the policy refuses anonymous maps (a cgroup would stop it at 6 GiB)
    "r-many-directories": 10_000, "r-many-symlinks": 10_000, "r-many-hard-links": 10_000,
    "r-torch-save-files": 10_000,         # files in one writable folder
    "r-pipe-buffers": 1024, "r-socket-buffers": 1024,   # MiB of kernel buffers
    "r-thread-flood": 1024,               # tasks
    "r-eventfd-hoard": 1024,              # open files
}
RESOURCE_ROUND = [
    Submission("r-anon-shared-mmap", "stops", lambda: after_cell(release(), LAST_TEST, ANON_SHARED_MMAP), (),
               "6 GiB of anonymous shared memory (mmap(-1)): not the data segment", may_stop=True, after=("resource_capped",)),
    Submission("r-many-directories", "stops", lambda: after_cell(release(), LAST_TEST, MANY_DIRECTORIES), (),
               "400,000 empty folders in /tmp", after=("resource_capped",)),
    Submission("r-many-symlinks", "stops", lambda: after_cell(release(), LAST_TEST, MANY_SYMLINKS), (),
               "400,000 symbolic links in the working folder", after=("resource_capped",)),
    Submission("r-many-hard-links", "stops", lambda: after_cell(release(), LAST_TEST, MANY_HARD_LINKS), (),
               "400,000 hard links to one file in /dev/shm", after=("resource_capped",)),
    Submission("r-torch-save-files", "stops", lambda: after_cell(release(), LAST_TEST, TORCH_SAVE_FILES), (),
               "200,000 files written by torch.save (C++, no Python open)", after=("resource_capped",)),
    Submission("r-pipe-buffers", "stops", lambda: after_cell(release(), LAST_TEST, PIPE_BUFFERS), (),
               "pipes enlarged to 1 MiB and filled, file limit raised to its hard value", after=("resource_capped",)),
    Submission("r-socket-buffers", "stops", lambda: after_cell(release(), LAST_TEST, SOCKET_BUFFERS), (),
               "datagrams queued in Unix socket pairs", after=("resource_capped",)),
    Submission("r-thread-flood", "stops", lambda: after_cell(release(), LAST_TEST, THREAD_FLOOD), (),
               "30,000 threads with 64 KiB stacks", after=("resource_capped",)),
    Submission("r-eventfd-hoard", "stops", lambda: after_cell(release(), LAST_TEST, EVENTFD_HOARD), (),
               "2 million eventfds after raising the file limit", after=("resource_capped",)),
    Submission("r-stream-flood", "stops", lambda: after_cell(release(), LAST_TEST, STREAM_FLOOD), (),
               "1.5 GB printed in 1 MiB writes", may_stop=True, after=("output_capped", "grader_memory")),
    Submission("r-fd-flood", "stops", lambda: after_cell(release(), LAST_TEST, FD_FLOOD), (),
               "1.5 GB written to file descriptor 1", may_stop=True, after=("output_capped", "grader_memory")),
    Submission("r-display-flood", "stops", lambda: after_cell(release(), LAST_TEST, DISPLAY_FLOOD), (),
               "300,000 small HTML outputs", may_stop=True, after=("output_capped", "grader_memory")),
    Submission("h-scratch-files", "honest", lambda: after_cell(partly(causal_mask=CUMSUM_CAUSAL), LAST_TEST, HONEST_FILES),
               ("softmax", "scaled_dot_product_attention", "multi_head_attention"),
               "one answer of its own, then 300 scratch files and a saved figure (three exercises left as handed "
               "out)", after=("no_flag",)),
]
BY_NAME = {s.name: s for s in CATALOGUE + RESOURCE_ROUND}
CANARY = "h-plain"


# ----------------------------------------------------------------------------
# Grading them as an instructor does


@dataclass
class Run:
    """What one `plmcourse grade all` left: the course folder, its report, its temp folder."""
    course: Path
    report: str
    returncode: int
    tmp: Path
    seconds: float
    students: list = field(default_factory=list)
    peak_rss: int = 0  # bytes: the largest resident size of any process the run waited for


def scratch_course(root: Path) -> Path:
    """A course with 03_attention generated from the source, as `tasks.py release` would."""
    course = root / "course"
    course.mkdir(parents=True)
    shutil.copy(course_dir() / "nbgrader_config.py", course)
    shutil.copytree(course_dir() / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
                   cwd=course, check=True, capture_output=True, env=environment())
    return course


def environment(**extra):
    return {**os.environ, "PLMCOURSE_CELL_SECONDS": str(CELL_SECONDS),
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"], **extra}


def grade_all(root: Path, names) -> Run:
    """Grade the named submissions with one `plmcourse grade all`, its temp folder inside `root`."""
    course = scratch_course(root)
    export = root / "export"
    export.mkdir()
    for name in names:
        nbformat.write(BY_NAME[name].make(), export / f"{name}_{ASSIGNMENT}.ipynb")
    tmp = root / "tmp"
    tmp.mkdir()
    start = time.perf_counter()
    # TMPDIR: the grader's scratch folders land in our own folder, so that what a run leaves
    # behind is ours to see (and to remove), never another run's on a shared machine.
    # Waited for with wait4, whose account covers the grader and every process it waited for: the peak
    # resident size of the largest of them (Linux reports KiB).
    with open(root / "out.txt", "w+b") as out:
        child = subprocess.Popen([sys.executable, "-m", "plmcourse", "grade", "all", ASSIGNMENT, str(export),
                                  "--course", str(course)], stdout=out, stderr=subprocess.STDOUT,
                                 env=environment(TMPDIR=str(tmp)))
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        report = out.read().decode(errors="replace")
    run = Run(course, report, child.returncode, tmp, time.perf_counter() - start, list(names),
              usage.ru_maxrss * 1024)
    (root / "run.json").write_text(json.dumps({"report": run.report, "returncode": run.returncode,
                                               "seconds": run.seconds, "students": run.students,
                                               "peak_rss": run.peak_rss}))
    return run


def load_run(root: Path) -> Run:
    """A run graded earlier (kept with --keep), to judge again without grading again."""
    saved = json.loads((root / "run.json").read_text())
    return Run(root / "course", saved["report"], saved["returncode"], root / "tmp", saved["seconds"],
               saved["students"], saved.get("peak_rss", 0))


def remove_tree(path: Path) -> None:
    """Remove what a run left, deep trees and locked folders included (GNU rm copes with both)."""
    if path.exists():
        subprocess.run(["chmod", "-R", "u+rwx", str(path)], capture_output=True)
        subprocess.run(["rm", "-rf", "--", str(path)], capture_output=True)


# ----------------------------------------------------------------------------
# Reading what a run left


def gradebook_rows(course: Path) -> dict:
    """student -> {exercise: (score, needs_manual_grade, comment)}, from the gradebook through nbgrader's API."""
    from nbgrader.api import Gradebook, MissingEntry

    if not (course / "gradebook.db").exists():
        return {}
    rows = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student.id)
            except MissingEntry:  # not graded
                continue
            for grade in submission.grades:
                exercise = grade.name.removeprefix("test_")
                if exercise not in POINTS:
                    continue
                text = ""
                for cell in (exercise, grade.name):  # nbgrader keeps comments on answer cells
                    try:
                        comment = gradebook.find_comment(cell, ASSIGNMENT, ASSIGNMENT, student.id)
                        text += " ".join(filter(None, (comment.manual_comment, comment.auto_comment)))
                    except MissingEntry:
                        pass
                rows.setdefault(student.id, {})[exercise] = (float(grade.score), bool(grade.needs_manual_grade), text)
    return rows


def read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        return list(csv.DictReader(f))


def rendered_parts(course: Path, student: str) -> str:
    """What a view of the autograded notebook renders as markup: markdown and raw cells, outputs
    other than text and streams, attachments (code and printed text are shown escaped)."""
    try:
        nb = json.loads(autograded_text(course, student) or "{}")
    except ValueError:
        return ""
    parts = []
    for cell in nb.get("cells", []):
        source = cell.get("source", "")
        if cell.get("cell_type") in ("markdown", "raw"):
            parts.append("".join(source) if isinstance(source, list) else str(source))
        parts.append(json.dumps(cell.get("attachments", {})))
        for output in cell.get("outputs", []):
            for mime, value in (output.get("data") or {}).items():
                if mime != "text/plain":
                    parts.append("".join(value) if isinstance(value, list) else json.dumps(value))
    return "\n".join(parts)


def autograded_text(course: Path, student: str) -> str:
    path = course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def printed(course: Path, student: str) -> str:
    """Everything the student's kernel printed, from the autograded notebook."""
    text = autograded_text(course, student)
    if not text:
        return ""
    try:
        nb = json.loads(text)
    except ValueError:
        return ""
    out = []
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            value = output.get("text", "")
            out.append("".join(value) if isinstance(value, list) else str(value))
    return "".join(out)


def feedback_text(course: Path, student: str) -> str:
    path = course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def report_lines(run: Run, student: str) -> list[str]:
    return [line for line in run.report.splitlines() if line.startswith(f"judge: {student}:")]


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


# ----------------------------------------------------------------------------
# What must hold afterwards: each returns the problems found (an empty list: it holds)


FRAMED, FORGED = "h-threadpool-einsum", "copied the answer of"


def no_forged_lines(run, student):
    """No line of the report, the review table or the export pins the forged text on the framed student."""
    problems = [f"the report says: {line[:120]!r}" for line in report_lines(run, FRAMED) if FORGED in line]
    for row in read_csv(run.course / "review" / f"{ASSIGNMENT}.csv"):
        if row.get("student") == FRAMED and FORGED in row.get("evidence", ""):
            problems.append(f"the review table holds the forged row for {FRAMED}")
    for row in read_csv(run.course / "grades.csv"):
        if row.get("student_id") == FRAMED and FORGED in row.get("flags", ""):
            problems.append(f"the export holds the forged flag for {FRAMED}")
    return problems


def printable_flags(run, student):
    """Flag text reaches the instructor as one printable line of at most 300 characters."""
    problems = []
    if CONTROL.search(run.report.replace("\t", " ")):
        problems.append("the grading report carries control characters (terminal escapes, \\r, BEL)")
    review = read_csv(run.course / "review" / f"{ASSIGNMENT}.csv")
    for row in review:
        evidence = row.get("evidence", "")
        if CONTROL.search(evidence) or "\n" in evidence or len(evidence) > 300:
            problems.append(f"a review row of {row.get('student')} is not one printable line of <= 300 characters")
            break
    for row in read_csv(run.course / "grades.csv"):
        if CONTROL.search(row.get("flags", "")) or "\n" in row.get("flags", ""):
            problems.append(f"the export's flags of {row.get('student_id')} carry control characters")
            break
    return problems


def inert(run, student):
    """No script, handler or javascript: URL with the student's marker in the feedback or the autograded notebook."""
    problems = []
    for where, text in (("feedback", feedback_text(run.course, student)),
                        ("autograded notebook", rendered_parts(run.course, student))):
        found = sorted({m.group(0)[:60] for m in LIVE.finditer(text)})
        if found:
            problems.append(f"the {where} carries live {found[0]!r}" + (f" and {len(found) - 1} more" if found[1:] else ""))
    if not feedback_text(run.course, student):
        problems.append("no feedback page")
    return problems


def class_finished(run, student):
    """`grade all` ran to its end: every student exported, nothing crashed."""
    problems = []
    if run.returncode != 0:
        last = [line for line in run.report.splitlines() if line.strip()][-1:] or ["no message"]
        problems.append(f"grade all stopped (exit {run.returncode}: {last[0][:120]})")
    exported = {row.get("student_id") for row in read_csv(run.course / "grades.csv")}
    missing = [s for s in run.students if s not in exported]
    if missing:
        problems.append(f"{len(missing)} of {len(run.students)} students missing from the export")
    return problems


def nothing_left(run, student):
    """No plmcourse-grading-* scratch folder left in the temp folder."""
    left = sorted(p.name for p in run.tmp.glob("plmcourse-grading-*")) if run.tmp.exists() else []
    return [f"left on the host: {', '.join(left)}"] if left else []


def socket_capped(run, student):
    """The kernel could not write all it tried into its socket folder on the host."""
    found = re.search(r"socket folder: wrote (\d+) MB", printed(run.course, student))
    if found is None:
        return []  # it could not write at all (or its outputs are gone): nothing reached the host
    written = int(found.group(1))
    return [f"wrote {written} MB into the socket folder on the host"] if written >= FILL_TRIED_MB else []


HIDDEN_ONLY_SIZES = {3, 13, 32}  # check_causal_mask's hidden sizes that no visible case has


def hidden_values_kept(run, student):
    """The failure messages of hidden cases told the kernel none of their expected values."""
    found = re.findall(r"sizes learnt: \[([\d, ]*)\]", printed(run.course, student))
    learnt = {int(n) for n in found[-1].split(",") if n.strip()} if found else set()
    leaked = sorted(learnt & HIDDEN_ONLY_SIZES)
    return [f"learnt the hidden cases n={leaked} from the judge's messages"] if leaked else []


def flag_reaches_instructor(run, student):
    """The flag is in the gradebook (needs manual grade, with a comment), the export and the review table."""
    submission = BY_NAME[student]
    grades = gradebook_rows(run.course).get(student, {})
    problems = []
    for exercise in submission.flagged:
        _, needs, comment = grades.get(exercise, (0, False, ""))
        if not needs:
            problems.append(f"test_{exercise} is not marked for manual grading")
        elif not comment.strip():
            problems.append(f"{exercise} has no comment with the evidence")
    exported = {row.get("student_id"): row for row in read_csv(run.course / "grades.csv")}
    if not exported.get(student, {}).get("flags", "").strip():
        problems.append("the export has no flags for it")
    review = [r for r in read_csv(run.course / "review" / f"{ASSIGNMENT}.csv") if r.get("student") == student]
    if not any(r.get("exercise") in submission.flagged for r in review):
        problems.append("the review table has no row for it")
    return problems


def classmates_flagged(run, student):
    """The review table pairs the two classmates (source classmates, naming the other)."""
    other = "f-classmate-b" if student == "f-classmate-a" else "f-classmate-a"
    review = read_csv(run.course / "review" / f"{ASSIGNMENT}.csv")
    paired = [r for r in review if r.get("source") == "classmates" and r.get("student") in (student, other)
              and (other in r.get("evidence", "") or student in r.get("evidence", ""))]
    return [] if paired else [f"no classmates row pairs {student} with {other}"]


def no_flag(run, student):
    """An honest submission raises nothing: no report flag, no review row, nothing marked for manual
    grading (its code is its own: no classmate or course solution shares it)."""
    problems = [f"the report flags it: {line[len('judge: '):][:140]!r}" for line in report_lines(run, student)
                if "flagged" in line]
    for row in read_csv(run.course / "review" / f"{ASSIGNMENT}.csv"):
        if row.get("student") == student:
            problems.append(f"review row: {row.get('exercise')}, {row.get('source')}: {row.get('evidence', '')[:100]}")
    for exercise, (_, needs, _) in gradebook_rows(run.course).get(student, {}).items():
        if needs:
            problems.append(f"test_{exercise} marked for manual grading")
    return problems


def output_capped(run, student):
    """The autograded notebook is there and keeps at most the notebook's output cap, and when output was dropped
    (a cell says so) the report says so too."""
    problems = []
    text = autograded_text(run.course, student)
    size = len(text.encode())
    if not text:
        problems.append("no autograded notebook (no feedback for the student)")
    elif size > 20 * 1024 ** 2:
        problems.append(f"the autograded notebook is {size / 1024 ** 2:.0f} MB")
    dropped = "of this cell's output dropped while grading" in text or "output never reached the grader" in text
    said = any("outputs over the size cap" in line for line in run.report.splitlines() if student in line)
    if dropped and not said:
        problems.append("the report does not say that output was dropped")
    return problems


def resource_capped(run, student):
    """The kernel held no more of the resource than the cap allows (HELD_AT_MOST), by its own last word."""
    found = [int(n) for n in re.findall(r"^held: (\d+)$", printed(run.course, student), flags=re.M)]
    most = max(found, default=0)
    return [f"held {most} (the cap allows {HELD_AT_MOST[student]})"] if most > HELD_AT_MOST[student] else []


GRADER_MEMORY = 1536 * 1024 ** 2  # bytes: the largest grading process of an honest class peaks near 0.8 GB


def grader_memory(run, student):
    """No process of `grade all` grew past GRADER_MEMORY while this submission was graded."""
    if run.peak_rss > GRADER_MEMORY:
        return [f"a grading process reached {run.peak_rss / 1024 ** 3:.1f} GB"]
    return []


AFTERWARDS = {f.__name__: f for f in (no_forged_lines, printable_flags, inert, class_finished, nothing_left,
                                      socket_capped, hidden_values_kept, flag_reaches_instructor, classmates_flagged, no_flag,
                                      output_capped, resource_capped, grader_memory)}


# ----------------------------------------------------------------------------
# Verdicts


def verdict(run: Run, name: str, notes: list | None = None) -> tuple[float | None, list[str]]:
    """(total score got, problems): no problems means graded as deserved.

    Points above the deserved ones count as handed to a person (the design for evidence that
    cannot decide alone), not as paid, when that exercise is marked for manual grading AND the
    review table gives evidence about it from the submission itself (source kernel, answer, cell
    or collect; closeness to the course or a classmate says nothing about this attack);
    `notes`, when given, collects one line for each.
    """
    submission = BY_NAME[name]
    grades = gradebook_rows(run.course).get(name)
    evidence = {row.get("exercise") for row in read_csv(run.course / "review" / f"{ASSIGNMENT}.csv")
                if row.get("student") == name and row.get("source") in ("kernel", "answer", "cell", "collect")}
    problems, notes = [], [] if notes is None else notes
    if not grades:
        problems.append("not graded")
        got = None
    else:
        got = sum(score for score, _, _ in grades.values())
        for exercise, points in POINTS.items():
            score, needs, _ = grades.get(exercise, (0.0, False, ""))
            deserved = 0 if exercise in submission.lost else points
            if score > deserved and not (needs and exercise in evidence):
                why = "" if not needs else " (marked for manual grading, but no evidence of this on it)"
                problems.append(f"cheat paid: {exercise} {score:g} of {deserved}{why}")
            elif score > deserved:
                notes.append(f"handed to a person: {exercise} {score:g} of {deserved}, marked for manual grading")
            elif score < deserved:
                problems.append(f"marks lost: {exercise} {score:g} of {deserved}")
    if f"{name}: nbgrader could not grade this submission" in run.report:  # its scores are the judge's alone
        problems.append("nbgrader could not grade it (no autograded notebook, no feedback)")
    for condition in submission.after:
        problems += AFTERWARDS[condition](run, name)
    return got, problems


def classify(problems, notes=()) -> str:
    if not problems:
        return "flagged for a person" if notes else "graded as deserved"
    if any(p.startswith("cheat paid") for p in problems):
        return "cheat paid"
    if any(p.startswith("marks lost") for p in problems) and len(problems) == sum(
            p.startswith("marks lost") for p in problems):
        return "marks lost"
    return "breach"


def table(results) -> str:
    """The markdown table: one row per submission."""
    lines = ["| student | class | how | deserved | got | verdict | what |", "|---|---|---|---|---|---|---|"]
    for name, (got, problems, notes) in results.items():
        s = BY_NAME[name]
        what = "; ".join(problems + notes).replace("|", "/") or "-"
        lines.append(f"| {name} | {s.kind} | {s.how} | {s.deserved} | {'-' if got is None else f'{got:g}'} | "
                     f"{classify(problems, notes)} | {what} |")
    counts = {}
    for _, problems, notes in results.values():
        counts[classify(problems, notes)] = counts.get(classify(problems, notes), 0) + 1
    lines.append("")
    lines.append(", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return "\n".join(lines)


def record(label: str, results) -> Path:
    """The table as bench/results/grading_attacks_<label>.json, for bench/RESULTS.md."""
    sys.path.insert(0, str(ROOT))
    from bench.common import write_result

    rows = [{"student": name, "class": BY_NAME[name].kind, "how": BY_NAME[name].how,
             "deserved": BY_NAME[name].deserved, "got": None if got is None else float(f"{got:g}"),
             "verdict": classify(problems, notes)} for name, (got, problems, notes) in results.items()]
    title = (f"Grading attacks (issue 32), {label}: plmcourse from {Path(plmcourse.__file__).parent}, "
             f"graded by `plmcourse grade all` with bubblewrap")
    return write_result(f"grading_attacks_{label}", {"title": title, "rows": rows})


def measure(workdir: Path, split: bool, again: bool = False, only=()) -> tuple[dict, list[Run]]:
    """Grade the catalogue (in one run, or with --split the may_stop ones alone) and judge every
    submission; again=True judges the runs kept in `workdir` without grading; `only` grades those
    submissions (and h-plain) instead of the whole catalogue."""
    pool = CATALOGUE + RESOURCE_ROUND if only else CATALOGUE
    names = [s.name for s in pool if not only or s.name in only or s.name == CANARY]
    groups = [names]
    if split:
        stoppers = [s.name for s in pool if s.may_stop and s.name in names]
        groups = [[n for n in names if n not in stoppers]] + [[n, CANARY] for n in stoppers]
    results, runs = {}, []
    for number, group in enumerate(groups):
        run = load_run(workdir / f"run{number}") if again else grade_all(workdir / f"run{number}", group)
        runs.append(run)
        print(f"run {number}: {len(group)} submissions, exit {run.returncode}, {run.seconds:.0f} s", file=sys.stderr)
        for name in group if number == 0 else group[:1]:
            notes = []
            got, problems = verdict(run, name, notes)
            results[name] = (got, problems, notes)
        if number and CANARY in group:  # the honest student beside a stopper must be graded too
            got, problems = verdict(run, CANARY)
            if problems:
                results[group[0]][1].append(f"the honest student beside it: {'; '.join(problems)}")
    order = {s.name: i for i, s in enumerate(CATALOGUE + RESOURCE_ROUND)}
    return dict(sorted(results.items(), key=lambda item: order[item[0]])), runs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true", help="grade the submissions that may stop the class alone")
    parser.add_argument("--keep", help="a folder to keep the runs in (default: a temporary one, removed)")
    parser.add_argument("--again", action="store_true", help="judge the runs kept in --keep without grading")
    parser.add_argument("--only", help="comma-separated submissions to grade (beside h-plain), not the whole catalogue")
    parser.add_argument("--record", metavar="LABEL",
                        help="also write the table to bench/results/grading_attacks_LABEL.json (RESULTS.md)")
    args = parser.parse_args(argv)
    import tempfile

    workdir = Path(args.keep or tempfile.mkdtemp(prefix="plmcourse-attacks-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        only = [n for n in (args.only or "").split(",") if n]
        results, runs = measure(workdir, args.split, again=args.again, only=only)
        print(f"plmcourse from {plmcourse.__file__}; {len(CATALOGUE)} submissions; "
              + ", ".join(f"run {i}: exit {r.returncode}, {r.seconds:.0f} s" for i, r in enumerate(runs)))
        print()
        print(table(results))
        if args.record:
            print(record(args.record, results))
    finally:
        if not args.keep:
            remove_tree(workdir)


if __name__ == "__main__":
    main()
