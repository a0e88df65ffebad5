"""PyTorch implementations (CPU and CUDA) with the same names and conventions as `plmcourse.ref`."""

from plmcourse.nn.device import default_device

__all__ = ["default_device"]
