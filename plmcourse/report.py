"""The environment report shown by notebook 00 and by `plmcourse doctor`."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sys
import tempfile
from pathlib import Path

import plmcourse

PACKAGES = ["numpy", "torch", "matplotlib", "ipywidgets", "tqdm", "jupyterlab", "nbgrader"]
REQUIRED = ["numpy", "torch", "matplotlib", "ipywidgets", "tqdm"]


def cache_dir() -> Path:
    """Where the course keeps files it makes (checkpoints, downloaded extras)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "plmcourse"
    return Path(os.environ.get("PLMCOURSE_CACHE", default))


def where_running() -> str:
    if "google.colab" in sys.modules:
        return "Google Colab"
    if "BINDER_SERVICE_HOST" in os.environ or "BINDER_REQUEST" in os.environ:
        return "Binder"
    return "local"


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def device_report() -> dict:
    import torch  # imported here so that `import plmcourse.report` stays cheap

    cuda = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name(0) if cuda else "CPU only (no CUDA device)",
        "cpu cores": os.cpu_count(),
        "torch threads": torch.get_num_threads(),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "not set"),
    }


def environment_report() -> dict:
    """Versions, platform and compute: everything a bug report needs, as a dict."""
    report = {
        "plmcourse": plmcourse.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "running on": where_running(),
    }
    for name in PACKAGES:
        report[name] = package_version(name) or "not installed"
    report.update(device_report())
    return report


def format_report(report: dict) -> str:
    width = max(len(k) for k in report)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in report.items())


def problems() -> list[str]:
    """One sentence per thing that stops the course from running here; empty when all is well."""
    found = []
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except Exception as err:  # an ImportError, or a broken install that fails differently
            found.append(f"The package {name} cannot be imported ({err}); "
                         f"install the course with `python3 tasks.py setup` or `pip install plmcourse`.")
    found += kernel_problems()
    found += cache_problems()
    if plmcourse.TORCH_LOADED_BEFORE_PLMCOURSE and "OMP_WAIT_POLICY" not in os.environ:
        found.append("torch was imported before plmcourse without OMP_WAIT_POLICY set; "
                     "import plmcourse first so NumPy and PyTorch do not starve each other.")
    return found


def kernel_problems() -> list[str]:
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError:
        return ["jupyter_client is missing, so no notebook kernel can start; "
                "install the course extras with `pip install plmcourse[course]`."]
    if "python3" not in KernelSpecManager().find_kernel_specs():
        return ["No Jupyter kernel named `python3` is installed (every course notebook uses it); "
                "run `python -m ipykernel install --sys-prefix --name python3`."]
    return []


def cache_problems() -> list[str]:
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as err:
        return [f"The cache directory {path} is not writable ({err.strerror}); "
                f"set PLMCOURSE_CACHE to a writable directory."]
    return []
