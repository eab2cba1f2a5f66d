"""The ``rfl-fast`` console command."""

import argparse
import sys

__all__ = ["main"]


def _info(args):
    import rfl_fast

    rfl_fast.show_config()
    return 0


def _progress_bar(quiet):
    """``progress(name, t, rounds)`` drawing one tqdm bar per run (nothing when quiet)."""
    if quiet:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bars = {}

    def progress(name, t, rounds):
        bar = bars.get(name)
        if bar is None:
            bar = bars[name] = tqdm(total=rounds, desc=f"{name:9s}", unit="round", leave=True)
        bar.update(1)
        if t == rounds:
            bar.close()

    return progress


def _demo(args):
    from .demo import run_demo, summary_table

    try:
        import matplotlib  # noqa: F401

        plot = True
    except ImportError:
        plot = False
    results = run_demo(args.rounds, out=args.out, seed=args.seed, plot=plot,
                       progress=_progress_bar(args.quiet))
    print(summary_table(results))
    print(f"histories (CSV){' and plots (grad_norm.png, .pdf)' if plot else ''} in {args.out}/")
    if not plot:
        print("install matplotlib (pip install 'rfl_fast[cli]') for the plots")
    return 0


def _bench(argv):
    from .bench import main as bench_main

    return bench_main(argv)


def build_parser():
    parser = argparse.ArgumentParser(prog="rfl-fast", description="Riemannian federated learning")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="federated kPCA on the wine data with the papers' "
                          "algorithms: summary table, histories and plots")
    demo.add_argument("--rounds", type=int, default=300, help="rounds per algorithm (300)")
    demo.add_argument("--out", default="rfl_fast_demo", help="output folder (rfl_fast_demo)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (0)")
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(func=_demo)
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
