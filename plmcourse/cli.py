"""The `plmcourse` command: `plmcourse doctor`, `plmcourse release`."""

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
    from plmcourse.release import release_course

    written = release_course(args.course, args.assignments or None)
    for path in written:
        print(f"release: wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="plmcourse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="print the environment report and check that the course can run")
    rel = sub.add_parser("release", help="regenerate course/release/ from course/source/ with nbgrader")
    rel.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    rel.add_argument("--course", default="course", help="the nbgrader course directory")
    args = parser.parse_args(argv)
    return {"doctor": doctor, "release": release}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
