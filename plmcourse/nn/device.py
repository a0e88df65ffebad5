"""Pick the device to run on: CUDA when a GPU is present, else the CPU."""

import torch


def default_device() -> torch.device:
    """The course's one device rule; every function also accepts an explicit device."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
