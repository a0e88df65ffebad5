"""The `plmcourse` command: `plmcourse doctor`, `release`, `grade`, `checkpoints build`."""

from __future__ import annotations

import argparse
import sys


def doctor(args: argparse.Namespace) -> int:
    from plmcourse.report import environment_report, format_report, problems

    print(format_report(environment_report()))
    found = problems()
    print()
    if not found:
        print("doctor: everything the course needs is here.")
        return 0
    for sentence in found:
        print(f"doctor: {sentence}")
    return 1


def release(args: argparse.Namespace) -> int:
    from pathlib import Path

    from plmcourse.release import release_course, rename_repository

    if args.repo:  # a fork: name it first, so that the notebooks' Colab cells follow
        try:
            old = rename_repository(Path(args.course).resolve().parent, args.repo)
        except (ValueError, FileNotFoundError) as err:
            print(f"release: {err}", file=sys.stderr)
            return 2
        print(f"release: the repository is now {args.repo} (was {old}) in pyproject.toml and README.md")
    written = release_course(args.course, args.assignments or None)
    for path in written:
        print(f"release: wrote {path}")
    return 0


def grade(args: argparse.Namespace) -> int:
    from pathlib import Path

    from plmcourse.autograde import review, workflow
    from plmcourse.autograde.evidence import one_line

    def say(step, text):
        # Much of what the steps report quotes a submission (file names, nbgrader's account of a
        # student's error): each line reaches the terminal as one escaped line.
        for line in str(text).splitlines():
            print(one_line(f"{step}: {line}" if step else line, 2000))

    course = Path(args.course)
    if args.step in ("collect", "all"):
        if args.exchange:
            say("", workflow.collect_exchange(course, args.assignment, Path(args.exchange)))
        else:
            say("", workflow.collect(course, args.assignment, Path(args.folder)))
    if args.step in ("autograde", "all"):
        for line in workflow.prepare_submissions(course, args.assignment, args.student):
            say("autograde", line)
        done = workflow.autograde(course, args.assignment, use_sandbox=not args.no_sandbox,
                                  memory=int(args.memory_gb * 1024 ** 3), student=args.student,
                                  jobs=args.jobs)
        say("judge", done.stdout)
        say("", done.stderr if done.returncode else "autograde: done")
    if args.step in ("feedback", "all"):
        done = workflow.feedback(course, args.assignment)
        say("", done.stderr if done.returncode else f"feedback: written to {course / 'feedback'}")
        for line in workflow.clean_graded_folders(course, args.assignment, args.student):
            say("feedback", line)
        if args.exchange and not done.returncode:
            released = workflow.release_feedback(course, args.assignment, Path(args.exchange))
            say("", released.stderr if released.returncode else "feedback: released through the exchange")
    if args.step in ("export", "all"):
        done = workflow.export(course, args.to)
        say("", done.stderr if done.returncode else f"export: grades written to {course / args.to}")
    if args.step in ("report", "all"):
        from plmcourse.autograde import class_report

        try:
            page, table = class_report.write(course, args.assignment)
            say("report", f"the class at a glance: {page} (and {table.name} beside it)")
        except Exception as error:  # a bug of ours: the grades are in the gradebook already and stand
            say("report", f"the class report could not be written ({type(error).__name__}: {error}); "
                          f"the grades stand")
    if args.step in ("review", "all"):
        for line in review.review_table(course, args.assignment):
            print(f"review: {line}")  # its cells are escaped one by one; say() would collapse its columns
        rows = review.read_review(course, args.assignment)
        if rows:
            written = review.write_rows(rows, Path(args.csv)) if args.csv else \
                review.review_folder(course) / f"{args.assignment}.csv"
            say("review", f"the table is in {written}")
    return 0


def checkpoints(args: argparse.Namespace) -> int:
    from plmcourse.pretrained.checkpoints import main as checkpoints_main

    try:
        return checkpoints_main([args.step, *args.names])
    except ValueError as err:  # a misspelt name: one sentence, no traceback
        print(f"checkpoints: {err}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="plmcourse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="print the environment report and check that the course can run")
    rel = sub.add_parser("release", help="regenerate course/release/ from course/source/ with nbgrader")
    rel.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    rel.add_argument("--course", default="course", help="the nbgrader course directory")
    rel.add_argument("--repo", metavar="OWNER/NAME",
                     help="a fork: rewrite the GitHub, Binder and Colab links to this repository first")
    graded = sub.add_parser("grade", help="collect, autograde (sandboxed, judged outside the kernel), feedback, "
                                          "export, report (the class at a glance), review (the flags, most "
                                          "suspicious first)")
    graded.add_argument("step", choices=["collect", "autograde", "feedback", "export", "report", "review", "all"])
    graded.add_argument("assignment", nargs="?", help="e.g. 03_attention (not needed for export)")
    graded.add_argument("folder", nargs="?", help="collect/all: the folder of exported submissions")
    graded.add_argument("--exchange", metavar="FOLDER",
                        help="a class on JupyterHub: collect from nbgrader's exchange in FOLDER, and feedback "
                             "released to it (instead of a folder of exported submissions)")
    graded.add_argument("--course", default="course", help="the nbgrader course directory")
    graded.add_argument("--no-sandbox", action="store_true", help="grade without isolation (not advised)")
    graded.add_argument("--memory-gb", type=float, default=4.0, help="memory ceiling per notebook")
    graded.add_argument("--to", default="grades.csv", help="export: the CSV file, inside the course")
    graded.add_argument("--student", help="autograde: only this student (default: everyone)")
    graded.add_argument("--csv", help="review: also write the table to this CSV file")
    graded.add_argument("--jobs", type=int, default=None,
                        help="autograde: notebooks graded at once (default: the number of CPU cores)")
    built = sub.add_parser("checkpoints", help="rebuild the course's shipped tiny BERT/GPT from their seeds")
    built.add_argument("step", choices=["build"])
    built.add_argument("names", nargs="*", help="tiny-bert, tiny-bert-reviews, tiny-gpt (default: all)")
    args = parser.parse_args(argv)
    if args.command == "grade" and args.step != "export" and not args.assignment:
        parser.error(f"grade {args.step} needs an assignment name")
    if args.command == "grade" and args.step in ("collect", "all") and not (args.folder or args.exchange):
        parser.error(f"grade {args.step} needs the folder of submissions (or --exchange FOLDER)")
    return {"doctor": doctor, "release": release, "grade": grade, "checkpoints": checkpoints}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
