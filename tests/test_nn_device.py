"""plmcourse.nn.device: the one device rule and the one-thread setting for tiny models."""

import pytest
import torch

from plmcourse import nn as pnn


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield threads
    torch.set_num_threads(threads)


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_use_one_cpu_thread_sets_one_thread_on_a_cpu(restore_threads, device):
    torch.set_num_threads(2)
    pnn.use_one_cpu_thread(device)
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("device", ["cuda", torch.device("cuda:0"), "meta"])
def test_use_one_cpu_thread_leaves_other_devices_alone(restore_threads, device):
    torch.set_num_threads(2)
    pnn.use_one_cpu_thread(device)  # needs no GPU: only the device's type is read
    assert torch.get_num_threads() == 2


def test_default_device_follows_cuda():
    assert pnn.default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
