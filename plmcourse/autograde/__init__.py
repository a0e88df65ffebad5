"""What an instructor runs to grade: the sandbox, the judge, the workflow, nbgrader plug-ins.

Nothing here is imported by a student's notebook; `plmcourse.grading` is that side.
How the two meet is drawn in `plmcourse.grading`'s docstring.

- `workflow`: `plmcourse grade collect / autograde / feedback / export / all`.
- `sandbox`: the kernel launcher nbgrader starts for each notebook: bubblewrap, an empty
  root, a clean environment, and the judge's socket handed to the kernel.
- `judge`: the grader's side of every check; it never imports or runs student code.
- `demos`: which cells grading may skip; `nbgrader_ext`: nbgrader preprocessors.
"""
