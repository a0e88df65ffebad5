"""bench claims: a notebook run at several seeds, each top-level assert recorded without stopping the run."""

import nbformat
import pytest

from bench import claims

pytestmark = pytest.mark.notebook


def test_claims_records_every_assert_at_every_seed_and_the_quoted_numbers(tmp_path, monkeypatch):
    name = "99_toy"
    (tmp_path / name).mkdir()
    cells = [
        "SEED = 0\nvalue = 10 + SEED",
        "assert value == 10, 'only the shipped seed'\nassert value > 5\nafter = value * 2",  # the run goes on
        "def guarded(x):\n    assert x > 0, 'inside a function: not a claim'\n    return x\n\n"
        "for i in range(3):\n    assert i < 2 or SEED == 0\nif SEED != 2:\n    assert SEED < 1000",
        "raise_at_seed_1 = 1 / (SEED - 1)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbformat.write(nb, tmp_path / name / f"{name}.ipynb")
    monkeypatch.setattr(claims, "SOURCE", tmp_path)
    monkeypatch.setattr(claims, "NUMBERS", {name: {"twice the value": "after", "never set": "missing_name"}})

    runs = [claims.run_seed(name, seed) for seed in (0, 1, 2, 1234)]  # 1234: a fresh seed, not a development one
    assert [r["numbers"]["twice the value"] for r in runs] == [20.0, 22.0, 24.0, 2488.0]
    assert all(isinstance(r["numbers"]["never set"], str) for r in runs)
    texts = [text for text, *_ in runs[1]["claims"]]
    assert texts == ["value == 10", "value > 5", "i < 2 or SEED == 0", "i < 2 or SEED == 0",
                     "i < 2 or SEED == 0", "SEED < 1000"]  # the function's assert is not a claim
    assert runs[1]["claims"][0] == ["value == 10", False, "only the shipped seed", None]  # its message kept
    assert runs[1]["claims"][1] == ["value > 5", True, "", 6.0]  # and the margin of a comparison: 11 - 5
    assert runs[1]["errors"] and "division" in runs[1]["errors"][0]
    assert not runs[0]["errors"] and not runs[2]["errors"]

    table = {row["claim"]: row for row in claims.rows(runs)}
    assert table["`assert value == 10`"]["fails at seeds"] == "1, 2, 1234"
    assert table["`assert value == 10`"]["holds at"] == ("1 of 3 development seeds, 0 of 1 fresh; "
                                                         "no margin (not a comparison of numbers at every seed)")
    # margins 5, 6, 7 at the development seeds: 6 ± 1, so 6 standard deviations (KEEP_AT is 3)
    assert table["`assert value > 5`"]["holds at"] == "3 of 3 development seeds, 1 of 1 fresh; margin 6 ± 1, 6.0 sd"
    assert table["`assert value > 5`"]["margin (sd)"] == 6.0
    assert table["`assert i < 2 or SEED == 0`"]["fails at seeds"] == "1, 2, 1234"
    # not made at seed 2 (inside an `if`), failed at 1234: held at 2 of 3 development seeds and 0 of 1 fresh
    assert table["`assert SEED < 1000`"]["holds at"].startswith(
        "2 of 3 development seeds, 0 of 1 fresh (not made at seeds 2: a condition before it was false); margin ")
    # mean ± sample standard deviation over the development seeds, their range, then each fresh seed's value
    assert table["twice the value"]["holds at"] == "22.000 ± 2.000 (N=3; 20.000 to 24.000); fresh: 2488.000"
    assert table["never set"]["holds at"] == "not reached; fresh: not reached"
    assert table["a cell raised (not an assert)"]["fails at seeds"] == "1"


def test_fresh_seeds_are_new_each_run_and_never_a_development_seed():
    drawn = [claims.fresh_seeds(4) for _ in range(3)]
    assert all(len(set(d)) == 4 and not set(d) & set(claims.SEEDS) for d in drawn)
    assert len({tuple(d) for d in drawn}) == 3  # drawn again each time (a repeat has odds of about 1e-20)
    assert claims.FRESH_SEEDS >= 4


def test_a_margin_is_the_smaller_gap_of_a_chain_and_negative_where_the_claim_failed():
    import ast

    class Shell:
        ast_transformers = []

    namespace = {"get_ipython": lambda: Shell}
    exec(claims.RECORDER, namespace)
    cell = ("x = 3.0\nassert 1 < x <= 3.5\nassert x > 2 * 2\nassert x == 3\n"
            "for i in range(2):\n    assert i < 1\n")
    tree = ast.fix_missing_locations(Shell.ast_transformers[0].visit(ast.parse(cell)))
    exec(compile(tree, "cell", "exec"), namespace)
    assert namespace["_CLAIMS"] == [("1 < x <= 3.5", True, "", 0.5),    # min(3 - 1, 3.5 - 3)
                                    ("x > 2 * 2", False, "", -1.0),      # failed by 1
                                    ("x == 3", True, "", None),          # not an ordering: no margin
                                    ("i < 1", True, "", 1.0), ("i < 1", False, "", 0.0)]
    run = {"claims": namespace["_CLAIMS"]}
    assert claims.margins(run)["i < 1"] == 0.0  # a claim made twice in a run: its smaller margin
    assert claims.margin_summary([2.0, 2.0]) == ("margin 2 at every seed", float("inf"))
    assert claims.margin_summary([1.0, None])[1] is None
