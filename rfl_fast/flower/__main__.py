"""``python -m rfl_fast.flower new-app DIR [--overwrite] [key=value ...]``: write a Flower app
directory (a folder that is not empty is refused without ``--overwrite``; exit code 2)."""

import argparse
import json
import sys

from .app import write_app


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m rfl_fast.flower",
                                 description="rfl_fast on Flower")
    sub = ap.add_subparsers(dest="cmd", required=True)
    new = sub.add_parser("new-app", help="write a Flower app directory (pyproject.toml + module)")
    new.add_argument("directory")
    new.add_argument("--overwrite", action="store_true",
                     help="write into a folder that is not empty (replacing the app's files)")
    new.add_argument("config", nargs="*", metavar="key=value",
                     help="run config defaults; values are read as JSON when they parse "
                          "(numbers, true/false), else as strings")
    args, rest = ap.parse_known_args(argv)     # key=value items may follow --overwrite
    unknown = [r for r in rest if r.startswith("-") or "=" not in r]
    if unknown:
        ap.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.config += rest
    cfg = {}
    for item in args.config:
        key, _, value = item.partition("=")
        try:
            v = json.loads(value)
            cfg[key] = v if isinstance(v, (int, float, bool)) else value
        except json.JSONDecodeError:
            cfg[key] = value
    try:
        print(write_app(args.directory, cfg, overwrite=args.overwrite))
    except FileExistsError as exc:
        print(f"python -m rfl_fast.flower new-app: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
