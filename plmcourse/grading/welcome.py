"""The practice check of notebook 00, as a student's kernel holds it.

It is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.welcome."""

from plmcourse.grading.core import Check


__all__ = ["check_normalize"]


check_normalize = Check(
    name="check_normalize",
    doc="""Check notebook 00's practice exercise; hidden=True adds inputs the notebook never shows.""",
    arg_names=("v",),
)
