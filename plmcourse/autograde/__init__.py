"""What an instructor runs to grade: the sandbox, the judge, the workflow, nbgrader plug-ins.

Nothing here is imported by a student's notebook; `plmcourse.grading` is that side, and
`plmcourse.judging` (the checks' cases, references and catalogues) is the judge's, which the
grading sandbox holds no more than this folder. How they meet is drawn in `plmcourse.grading`'s
docstring.

The rule every part keeps: **everything that comes from the sandbox is hostile data.** Return
values, the kernel's reports of its own calls, stdout and stderr, the notebook JSON and any
file a submission brings or writes are read strictly, never run, never unpickled, and never
trusted to clear anything:

- the grade is decided in the judge, from the kernel's answers to inputs it chose; the
  kernel's report of what an answer called can add evidence (a flag, a failed seal), and its
  silence clears nothing: the same evidence is read off the submitted source by the grader
  (`evidence`), where the student cannot edit it after the fact;
- each check's first hidden run decides, and the kernel is never told a hidden case's values;
- every piece of submission text that reaches a person (a flag, a judge's sentence quoting an
  exception, a report line, a CSV cell) is one escaped, bounded line (`evidence.one_line`,
  `review.spreadsheet_safe`); every page made from a submission is inert (`inert`);
- one submission cannot stop or change another's grading: each is read in its own bounded
  process or kernel, and what fails costs that student a line, never the class its grades.

- `workflow`: `plmcourse grade collect / autograde / feedback / export / review / all`.
- `sandbox`: the kernel launcher nbgrader starts for each notebook: bubblewrap, an empty
  root, a clean environment, and the judge's socket handed to the kernel.
- `exposure`: what of the course package an assignment's notebooks reach (the rest is stubbed
  in its sandbox).
- `judge`: the grader's side of every check; it never imports or runs student code.
- `evidence`: what a submission's source shows, read in a bounded child process; flags.
- `review`: flags into the gradebook, `course/review/<assignment>.csv` and the export.
- `inert`: the autograded notebooks made safe to open (feedback, formgrader).
- `demos`: which cells grading may skip; `nbgrader_ext`: nbgrader preprocessors and the export.
"""
