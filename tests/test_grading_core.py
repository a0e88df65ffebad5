"""plmcourse.grading.core: a check refuses a verdict when a library was tampered with before it loaded."""

import subprocess
import sys
import textwrap

import plmcourse  # noqa: F401


def run(code, tmp_path):
    # The patch lives in a file outside the libraries, as a notebook cell's code does.
    script = tmp_path / "cell.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True)


def test_clean_import_sees_no_tampering():
    from plmcourse.grading import core

    assert core.TAMPERED == []


def test_replacement_before_import_makes_every_check_refuse(tmp_path):
    done = run("""
        import plmcourse, numpy as np
        np.allclose = lambda *a, **k: True          # before the checks are imported
        from plmcourse.grading import check_causal_mask, CheckFailed
        try:
            check_causal_mask(lambda n: np.tril(np.ones((n, n), dtype=bool)))
        except CheckFailed as failure:
            print(failure)
    """, tmp_path)
    assert "cannot give a verdict in this kernel: the notebook replaced numpy.allclose" in done.stdout


def test_replacement_after_import_is_undone_for_the_verdict(tmp_path):
    done = run("""
        import plmcourse, numpy as np
        from plmcourse.grading import check_causal_mask, CheckFailed
        np.allclose = lambda *a, **k: True          # after: pristine() puts the original back
        np.equal = lambda *a, **k: np.True_
        try:
            check_causal_mask(lambda n: np.triu(np.ones((n, n), dtype=bool)))
        except CheckFailed as failure:
            print(failure)
    """, tmp_path)
    assert "check_causal_mask failed on case 1" in done.stdout and "np.triu" in done.stdout
