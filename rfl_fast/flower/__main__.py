"""``python -m rfl_fast.flower new-app DIR [key=value ...]``: write a Flower app directory."""

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
    new.add_argument("config", nargs="*", metavar="key=value",
                     help="run config defaults; values are read as JSON when they parse "
                          "(numbers, true/false), else as strings")
    args = ap.parse_args(argv)
    cfg = {}
    for item in args.config:
        key, _, value = item.partition("=")
        try:
            v = json.loads(value)
            cfg[key] = v if isinstance(v, (int, float, bool)) else value
        except json.JSONDecodeError:
            cfg[key] = value
    print(write_app(args.directory, cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
