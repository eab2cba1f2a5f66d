"""The ``rfl-fast`` console command."""

import argparse
import sys

__all__ = ["main"]


def _info(args):
    import rfl_fast

    rfl_fast.show_config()
    return 0


def _bench(args):
    from .bench import main as bench_main

    return bench_main(args.rest)


def build_parser():
    parser = argparse.ArgumentParser(prog="rfl-fast", description="Riemannian federated learning")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("info", help="versions, backends and thread settings").set_defaults(func=_info)
    bench = sub.add_parser("bench", help="kernel timings of every backend against NumPy",
                           add_help=False)
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    bench.set_defaults(func=_bench)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
