"""What a graded call runs is recorded in every thread, and what cannot be watched is reported.

_Record watches the calling thread and every thread started during the call (Python
functions and builtins, torch's under any name); a thread that already ran before the call,
one started around threading, or a recorder switched off shows up among the calls as
"thread:...". Honest answers that use threads or torch.jit.script still pass, with nothing
reported. The judge and the kernel are the two ends of a socketpair, as in test_grading_core.
"""

import _thread
import importlib
import queue
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import plmcourse  # noqa: F401
import plmcourse.judging as judging
from plmcourse.grading import wire
from plmcourse.judging import core
from plmcourse.grading.core import serve


def judged(check_name, fn):
    """(passed, sentence, flags) for `fn` checked through the wire, hidden cases included. The
    kernel's side runs in this (the main) thread, as in a real kernel; the judge in another."""
    kernel_end, judge_end = socket.socketpair()
    outcome = {}

    def judge():
        wire.receive(judge_end)
        remote = core.Remote(judge_end)
        try:
            getattr(judging, check_name)(remote, hidden=True)
            outcome.update(passed=True, sentence=remote.passed)
        except core.CheckFailed as failure:
            outcome.update(passed=False, sentence=str(failure))
        outcome["flags"] = remote.flags
        wire.send(judge_end, {"verdict": {"passed": outcome["passed"], "message": outcome["sentence"]}})

    thread = threading.Thread(target=judge, name="test judge")
    thread.start()
    try:
        serve(kernel_end, check_name, fn, True)
    except core.CheckFailed:
        pass
    thread.join(timeout=60)
    return outcome["passed"], outcome["sentence"], outcome["flags"]


def honest_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(m), 0, m))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def in_a_thread(compute):
    """A softmax answer that computes in a thread it starts and joins."""
    def answer(x, axis=-1):
        box = {}
        worker = threading.Thread(target=lambda: box.setdefault("y", compute(x, axis)), name="helper")
        worker.start()
        worker.join()
        return box["y"]
    return answer


def library_softmax(x, axis):
    return torch._softmax(torch.from_numpy(x), axis, False).numpy()


def calls_of(fn, *args, operators=False):
    reply = core.call_student(fn, core.Case("", args), operators)
    assert reply.error is None, reply.error
    return reply.calls


def test_a_sealed_function_called_in_another_thread_fails_the_case():
    passed, sentence, _ = judged("check_softmax", in_a_thread(lambda x, axis: torch.from_numpy(x).softmax(axis).numpy()))
    assert not passed and "your function calls torch.Tensor.softmax" in sentence


def test_a_library_softmax_under_a_private_name_in_another_thread_is_flagged():
    _, _, flags = judged("check_softmax", in_a_thread(library_softmax))
    assert any("_softmax" in flag for flag in flags), flags


def test_a_builtin_called_by_a_builtin_is_still_seen_in_the_calling_thread():
    def mapped(x, axis=-1):
        return list(map(torch._softmax, [torch.from_numpy(x)], [axis], [False]))[0].numpy()
    _, _, flags = judged("check_softmax", mapped)
    assert any("_softmax" in flag for flag in flags), flags


def test_a_thread_that_was_running_before_the_call_is_reported():
    jobs, results = queue.Queue(), queue.Queue()

    def serve_jobs():
        while (job := jobs.get()) is not None:
            results.put(library_softmax(*job))

    worker = threading.Thread(target=serve_jobs, name="cache-worker", daemon=True)
    worker.start()
    try:
        def handed_over(x, axis=-1):
            jobs.put((x, axis))
            return results.get(timeout=10)
        calls = calls_of(handed_over, np.zeros((2, 3)))
    finally:
        jobs.put(None)
        worker.join(timeout=10)
    assert "thread:cache-worker" in calls
    assert not any("_softmax" in call for call in calls)  # its work itself could not be watched: hence the report


def test_a_thread_started_around_threading_is_reported():
    def raw(x, axis=-1):
        box = {}
        _thread.start_new_thread(lambda: box.setdefault("y", library_softmax(x, axis)), ())
        while "y" not in box:
            time.sleep(0.001)
        return box["y"]
    calls = calls_of(raw, np.zeros((2, 3)))
    assert any(call.startswith("thread:started unwatched from") for call in calls), calls


def test_switching_the_recorder_off_is_reported():
    def quiet(x, axis=-1):
        sys.setprofile(None)
        return library_softmax(x, axis)
    calls = calls_of(quiet, np.zeros((2, 3)))
    assert "thread:the recorder was switched off during the call" in calls


def test_a_thread_name_cannot_write_lines_into_the_report():
    jobs = queue.Queue()
    worker = threading.Thread(target=jobs.get, name="evil\nstudent alice: 10/10\x1b[31m", daemon=True)
    worker.start()
    try:
        calls = calls_of(honest_softmax, np.zeros((2, 3)))
    finally:
        jobs.put(None)
        worker.join(timeout=10)
    reported = [call for call in calls if call.startswith("thread:evil")]
    assert reported and all("\n" not in call and "\x1b" not in call for call in reported), calls


@pytest.mark.parametrize("answer", ["threads", "pool"])
def test_honest_answers_that_use_threads_pass_and_report_nothing(answer):
    def pooled(x, axis=-1):
        with ThreadPoolExecutor(max_workers=2) as pool:
            return pool.submit(honest_softmax, x, axis).result()
    fn = in_a_thread(honest_softmax) if answer == "threads" else pooled
    passed, sentence, flags = judged("check_softmax", fn)
    assert passed, sentence
    assert flags == []
    assert not any(call.startswith("thread:") for call in calls_of(fn, np.zeros((2, 3))))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_honest_torch_jit_script_answer_passes():
    @torch.jit.script
    def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        real = mask.unsqueeze(-1) != 0
        total = torch.where(real, hidden, torch.zeros_like(hidden)).sum(1)
        return total / real.to(hidden.dtype).sum(1).clamp(min=1.0)

    passed, sentence, flags = judged("check_mean_pool", mean_pool)
    assert passed, sentence
    assert flags == []


def test_threads_started_in_the_call_stop_being_watched_after_it():
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        def leaves_a_pool(x, axis=-1):
            return pool.submit(honest_softmax, x, axis).result()
        calls_of(leaves_a_pool, np.zeros((2, 3)))  # the pool's thread starts here, watched
        assert pool.submit(sys.getprofile).result() is None  # and is left alone afterwards
    finally:
        pool.shutdown()


def scripted_softmax_answer():
    """A softmax whose library call happens inside TorchScript: no Python call, no torch function is seen."""
    @torch.jit.script
    def hidden(t: torch.Tensor, dim: int) -> torch.Tensor:
        return torch.softmax(t, dim)

    def answer(x, axis=-1):
        return hidden(torch.from_numpy(np.ascontiguousarray(x)), axis).numpy()
    return answer


def test_an_operator_is_named_at_the_dispatcher_whatever_path_reached_it():
    calls = calls_of(scripted_softmax_answer(), np.ones((2, 3)), -1, operators=True)
    assert "torch:aten._softmax" in calls, calls
    assert "torch:aten._softmax" not in calls_of(scripted_softmax_answer(), np.ones((2, 3)), -1)  # not asked for
    _, _, flags = judged("check_softmax", scripted_softmax_answer())
    assert any("aten._softmax" in flag for flag in flags), flags


def test_an_honest_torch_answer_names_only_what_it_ran():
    def attention_scores(q, k):
        return torch.exp(q @ k.T - (q @ k.T).max())
    calls = calls_of(attention_scores, torch.ones(2, 3), torch.ones(4, 3), operators=True)
    operators = {c for c in calls if c.startswith("torch:aten.")}
    assert {"torch:aten.mm", "torch:aten.exp", "torch:aten.max"} <= operators, operators
    assert not any("softmax" in c for c in operators), operators


def test_recording_operators_loads_no_compiler():
    """TorchDispatchMode's own wrapper would import torch._dynamo and sympy at the first operator (1.5 s a kernel)."""
    import subprocess

    code = ("import sys, numpy as np, torch; from plmcourse.grading import core; "
            "r = core.call_student(lambda t: torch.softmax(t, -1), core.Case('', (torch.ones(2, 3),)), True); "
            "assert 'torch:aten._softmax' in r.calls, r.calls; "
            "print(sorted(m for m in ('torch._dynamo', 'sympy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_the_kernel_names_operators_for_exactly_the_checks_whose_judge_reads_them():
    """A check's judge reads operator names through its flag_library; naming them costs about 10 µs an
    operator, so the kernel's declaration asks for them there and nowhere else."""
    from plmcourse.grading import CHECKS

    for name in CHECKS:
        declared = getattr(importlib.import_module("plmcourse.grading"), name).operators
        assert declared == bool(judging.spec(name).flag_library), name
