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
        "for i in range(3):\n    assert i < 2 or SEED == 0",
        "raise_at_seed_1 = 1 / (SEED - 1)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbformat.write(nb, tmp_path / name / f"{name}.ipynb")
    monkeypatch.setattr(claims, "SOURCE", tmp_path)
    monkeypatch.setattr(claims, "NUMBERS", {name: {"twice the value": "after", "never set": "missing_name"}})

    runs = [claims.run_seed(name, seed) for seed in (0, 1, 2)]
    assert [r["numbers"]["twice the value"] for r in runs] == [20.0, 22.0, 24.0]
    assert all(isinstance(r["numbers"]["never set"], str) for r in runs)
    texts = [text for text, _, _ in runs[1]["claims"]]
    assert texts == ["value == 10", "value > 5", "i < 2 or SEED == 0", "i < 2 or SEED == 0",
                     "i < 2 or SEED == 0"]  # the function's assert is not a claim
    assert runs[1]["claims"][0] == ["value == 10", False, "only the shipped seed"]  # its message kept
    assert runs[1]["errors"] and "division" in runs[1]["errors"][0]
    assert not runs[0]["errors"] and not runs[2]["errors"]

    table = {row["claim"]: row for row in claims.rows(runs)}
    assert table["`assert value == 10`"]["fails at seeds"] == "1, 2"
    assert table["`assert value > 5`"]["holds at"] == "3 of 3 seeds"
    assert table["`assert i < 2 or SEED == 0`"]["fails at seeds"] == "1, 2"
    assert table["twice the value"]["holds at"] == "20.000 to 24.000 (mean 22.000)"
    assert table["never set"]["holds at"] == "not reached"
    assert table["a cell raised (not an assert)"]["fails at seeds"] == "1"
