"""The checks of notebook 11 (in-context learning), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.icl."""

from plmcourse.grading.core import Check, expect_error_driver

__all__ = ["check_k_shot_prompt", "check_induction_score"]


REPORT_NEXT = "report_next_draw"  # a driver's keyword: also report the rng's next number after the call


def _prompt_driver(fn):
    """expect_error_driver, and for a case that asks, the rng's next number after the call (so the judge
    can tell how many numbers the answer drew)."""
    def drive(*args, **kwargs):
        if kwargs.pop(REPORT_NEXT, False):
            prompt = fn(*args, **kwargs)
            rng = kwargs["rng"]
            return {"prompt": prompt, "next": int(rng.integers(2 ** 62))}
        return expect_error_driver(fn)(*args, **kwargs)
    return drive


check_k_shot_prompt = Check(
    name="check_k_shot_prompt",
    doc="""Check `k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\\n", rng=None) -> str`.

    Compared with plmcourse.data.k_shot_prompt given a generator of the same seed: the demonstrations
    rng.choice(others, size=k, replace=False) in that order (others: every index but query's,
    increasing), each template.format(x=x, y=y), then the template cut just before "{y}" with the
    query's x, joined by separator; ValueError for k outside 0..len - 1.""",
    arg_names=("demonstrations", "query", "k", "template", "separator", "rng"),
    driver=_prompt_driver,
)


check_induction_score = Check(
    name="check_induction_score",
    doc="""Check a NumPy `induction_score(attention, tokens) -> (H,)`.

    Compared with plmcourse.ref.induction_score: for each query t whose token appeared before, the
    attention from t to s + 1, where s < t is the LATEST earlier position with the same token,
    averaged over those t for each head; np.zeros(H) when no token repeats.""",
    arg_names=("attention", "tokens"),
)
