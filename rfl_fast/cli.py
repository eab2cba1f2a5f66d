"""The ``rfl-fast`` console command."""

import argparse
import sys

__all__ = ["main"]


def _info(args):
    import rfl_fast

    rfl_fast.show_config()
    return 0


def _bench(argv):
    from .bench import main as bench_main

    return bench_main(argv)


def build_parser():
    parser = argparse.ArgumentParser(prog="rfl-fast", description="Riemannian federated learning")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("info", help="versions, backends and thread settings").set_defaults(func=_info)
    # parsed by rfl_fast.bench itself (its own --help)
    sub.add_parser("bench", help="kernel timings of every backend against NumPy", add_help=False)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
