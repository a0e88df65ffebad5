"""plmcourse: the companion package of an interactive course on pre-trained language models.

`plmcourse.ref` holds readable NumPy reference implementations (float64),
`plmcourse.nn` the PyTorch versions (CPU and CUDA) with the same names and
conventions, `plmcourse.grading` the checks that the notebooks' tests call (what a kernel holds of
them) and `plmcourse.judging` what only the judge runs of them (cases, references, mistakes).
"""

import os as _os
import sys as _sys

# NumPy's and PyTorch's thread pools spin-wait after each call; on a 2-core machine
# they starve each other (a NumPy call right after a torch op: 502 ms instead of
# 12 ms). OpenMP reads this once, when torch is loaded, so it must be set before
# the first `import torch`: notebooks import plmcourse first for this reason.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Remembered for `plmcourse doctor`: if torch was loaded first, the setting came too late.
TORCH_LOADED_BEFORE_PLMCOURSE = "torch" in _sys.modules

__version__ = "0.1.0"
