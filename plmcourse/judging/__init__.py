"""What only the judge runs: each check's cases, references, tolerances and catalogue of mistakes,
and the engine that judges (`core.run_check`).

One module per topic, under the same stem as the check's declaration in `plmcourse.grading`
(plmcourse.grading.CHECKS is the registry of both). Each module holds a `Spec` per check, under
the check's name. The grading sandbox does not hold this folder: a kernel being graded has the
declarations only, and the judge (plmcourse.autograde.judge) runs the Specs in its own process.
In a student's own kernel (no judge connected) a declaration runs its Spec from here, as feedback.
"""

import importlib

from plmcourse.grading import CHECKS

__all__ = ["CHECKS", "spec", *CHECKS]


def spec(name):
    """The Spec of the check called `name` ("check_softmax"); KeyError for a name the course lacks."""
    return getattr(importlib.import_module(f"plmcourse.judging.{CHECKS[name]}"), name)


def __getattr__(name):
    if name in CHECKS:
        return spec(name)
    raise AttributeError(f"module 'plmcourse.judging' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
