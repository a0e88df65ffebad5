"""Pick the device to run on: CUDA when a GPU is present, else the CPU; and how many CPU threads."""

from contextlib import contextmanager

import torch


def default_device() -> torch.device:
    """The course's one device rule; every function also accepts an explicit device."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def use_one_cpu_thread(device) -> None:
    """For a notebook whose models are all tiny (d <= 64): run everything on one CPU thread (see
    one_cpu_thread for why); on a GPU nothing changes. Measured on 2 cores, all threads against one
    (bench/RESULTS.md, the course's own budget): notebook 02 54 s against 24 s, 05 30 s against 25 s,
    14 33 s against 22 s."""
    if torch.device(device).type == "cpu":
        torch.set_num_threads(1)


@contextmanager
def one_cpu_thread(device):
    """Run the block on one CPU thread, then restore the setting; on a GPU nothing changes.

    For small tensors: a (400, 384) probe step, or a training step of the tiny BERT (d = 64).
    One thread does each operation in well under a millisecond; with more, every operation
    also waits for the others to wake up (the course sets OMP_WAIT_POLICY=PASSIVE, see
    plmcourse/__init__.py), and that wait dominates: on 2 shared cores, a probe takes 25 ms
    on one thread and 70-300 ms on two, and notebook 09 takes 45 s with its fine-tuning on one
    thread, 100-110 s with it on two.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
