"""Issue 23's fresh set of student-style answers (see README.md and RESULTS.md)."""
