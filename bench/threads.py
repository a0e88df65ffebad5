"""Does OMP_WAIT_POLICY=PASSIVE hold, and does it matter? NumPy right after PyTorch on few cores.

Both libraries keep thread pools that spin-wait after each call. Each variant runs in a
fresh interpreter (the policy is read once, when torch loads): a torch matmul, then at
once a NumPy matmul, whose time is what we measure. "via import plmcourse" is how the
course sets the policy: the variable is absent from the environment and `import
plmcourse` (before torch) sets it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.common import write_result

PROBE = r"""
import json, os, statistics, sys, time
if sys.argv[1] == "plmcourse":
    import plmcourse
import numpy as np
import torch

a = torch.randn(1024, 1024)
x = np.random.default_rng(0).standard_normal((512, 512))
times = []
for _ in range(15):
    torch.mm(a, a)
    start = time.perf_counter()
    x @ x
    times.append(time.perf_counter() - start)
print(json.dumps({"policy": os.environ.get("OMP_WAIT_POLICY", "not set"),
                  "numpy_ms": statistics.median(times[3:]) * 1e3}))
"""

VARIANTS = {
    "OMP_WAIT_POLICY not set": ({}, "plain"),
    "OMP_WAIT_POLICY=PASSIVE in the environment": ({"OMP_WAIT_POLICY": "PASSIVE"}, "plain"),
    "via import plmcourse (before torch)": ({}, "plmcourse"),
}


def run_variant(extra_env, mode):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(extra_env)
    done = subprocess.run([sys.executable, "-c", PROBE, mode], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def main():
    rows = []
    for name, (extra_env, mode) in VARIANTS.items():
        result = run_variant(extra_env, mode)
        rows.append({"variant": name, "policy seen": result["policy"],
                     "NumPy 512x512 matmul right after torch (ms, median)": round(result["numpy_ms"], 2)})
    return write_result("threads", {"title": "NumPy after PyTorch: thread pools on few cores",
                                    "rows": rows})


if __name__ == "__main__":
    print(main())
