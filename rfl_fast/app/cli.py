"""The ``rfl-fast`` console command.

Subcommands: ``demo``, ``run CONFIG``, ``reproduce ID`` (an id of ``experiments.EXPERIMENTS``),
``bench``, ``info``; each takes ``-q/--quiet`` and ``-v/--verbose``; ``rfl-fast
--version``. Exit codes: 0 success, 1 a run failed, 2 bad input (command line or experiment
file; nothing written), 130 interrupted by Ctrl-C (results so far written and marked).
"""

import argparse
import logging
import os
import sys
import traceback

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _error(command, msg):
    print(f"rfl-fast {command}: error: {msg}", file=sys.stderr)


def _version():
    """The installed distribution's version (without importing the package and its kernels)."""
    from importlib import metadata

    try:
        return metadata.version("rfl_fast")
    except metadata.PackageNotFoundError:  # a source tree
        import rfl_fast

        return rfl_fast.__version__


def _info(args):
    import rfl_fast

    if args.quiet:  # one line: version and backends
        print(f"rfl_fast {rfl_fast.__version__}: backends "
              f"{', '.join(rfl_fast.available_backends())}")
        return EXIT_OK
    rfl_fast.show_config()
    if args.verbose:
        from ..kernels import numba_cache_note

        print(numba_cache_note())
    return EXIT_OK


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
    from .demo import run_demo
    from .runner import summary_table

    try:
        import matplotlib  # noqa: F401

        plot = True
    except ImportError:
        plot = False
    results = run_demo(args.rounds, out=args.out, seed=args.seed, plot=plot,
                       progress=_progress_bar(args.quiet))
    if args.quiet:
        return EXIT_OK
    print(summary_table({name: res.history for name, res in results.items()}))
    print(f"histories (CSV){' and plots (grad_norm.png, .pdf)' if plot else ''} in {args.out}/")
    if not plot:
        print("install matplotlib (pip install matplotlib, or '.[cli]' in the source folder) "
              "for the plots")
    return EXIT_OK


def _run(args):
    from .config import ConfigError, load_plan
    from .runner import execute

    overrides = {"out": args.out, "rounds": args.rounds, "seed": args.seed,
                 "plots": [] if args.no_plots else None}
    try:
        plan = load_plan(args.config, overrides=overrides)
        outcome = execute(plan, overwrite=args.overwrite, progress=not args.quiet,
                          verbose=args.verbose, quiet=args.quiet)
    except ConfigError as exc:
        _error("run", f"{args.config}: {exc}")
        return EXIT_USAGE
    return {"completed": EXIT_OK, "interrupted": EXIT_INTERRUPTED}.get(outcome.status,
                                                                         EXIT_FAILED)


def _reproduce(args):
    import json

    from .experiments import expected_seconds, run_experiment

    out = args.out if args.out is not None else os.path.join("rfl_fast_results", args.id)
    if os.path.exists(out) and not os.path.isdir(out):
        _error("reproduce", f"--out: {out!r} exists and is not a folder")
        return EXIT_USAGE
    if not args.quiet:
        size = "small version" if args.small else "papers' setting"
        print(f"running {args.id} ({size}, seed {args.seed}); results in {out}{os.sep}",
              flush=True)
        t = expected_seconds(args.id, small=args.small)
        if t is not None:
            print(f"expected time: about {_duration(t)} (2-core machine; see "
                  f"rfl_fast.app.experiments.{args.id.lower()}.EXPECTED_S)", flush=True)
    try:
        res = run_experiment(args.id, small=args.small, seed=args.seed, out=out,
                             progress=None if args.quiet else _print_progress)
    except KeyboardInterrupt:
        print(f"rfl-fast reproduce: {args.id} interrupted; an experiment writes its files "
              f"when it finishes, so nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ImportError as exc:
        _error("reproduce", str(exc))
        return EXIT_FAILED
    plots = _plot_experiment(args.id, res, out, args.quiet)
    if args.table:
        from .experiments.tables import results_table, write_table
        plots.append(write_table(res, out))
        if not args.quiet:
            print(results_table(res))
    if args.quiet:
        return EXIT_OK
    print(f"{res['experiment']}: {res['title']} ({res['source']}), "
          f"{res['elapsed_s']:.1f} s")
    for note in res.get("notes", []):
        print(f"  note: {note}")
    if args.verbose:
        print(json.dumps(res["results"], indent=1, default=str))
    files = list(res.get("files", [])) + plots
    print(f"{len(files)} files in {out}{os.sep}: "
          + ", ".join(os.path.basename(f) for f in files[:8]) + (" ..." if len(files) > 8 else ""))
    return EXIT_OK


def _duration(seconds):
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _print_progress(exp_id, done, total, label, elapsed):
    """One line per finished run: runs done / total, the run (setting_algorithm), elapsed."""
    print(f"  {exp_id} [{done}/{total}] {_duration(elapsed):>6}  {label}", flush=True)


def _plot_experiment(exp_id, res, out, quiet):
    """Plots of the histories an experiment wrote: per metric, one panel per setting, one line
    per run (:func:`rfl_fast.app.experiments.plots.plot_experiment`)."""
    try:
        from .experiments.plots import plot_experiment

        return plot_experiment(exp_id, res, out)
    except ImportError as exc:
        if not quiet:
            print(f"plots skipped: {exc}")
        return []
    except (KeyError, ValueError) as exc:  # histories without the plotted columns
        if not quiet:
            print(f"plots skipped: {exc}")
        return []


def _bench(argv):
    from .bench import main as bench_main

    try:
        return bench_main(argv)
    except SystemExit as exc:  # its argparse: usage errors exit 2, --help 0
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE


def _experiment_id(value):
    from .experiments import EXPERIMENTS

    key = value.strip().upper()
    if key not in EXPERIMENTS:
        raise argparse.ArgumentTypeError(f"unknown experiment {value!r}; allowed: "
                                         f"{', '.join(EXPERIMENTS)}")
    return key


def _nonnegative_int(value):
    try:
        v = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def build_parser():
    parser = argparse.ArgumentParser(prog="rfl-fast", description="Riemannian federated learning")
    parser.add_argument("--version", action="version", version=f"rfl-fast {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chat = argparse.ArgumentParser(add_help=False)
    level = chat.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", action="store_true", help="no progress bars or messages")
    level.add_argument("-v", "--verbose", action="store_true",
                       help="more detail (metrics during the run, tracebacks)")

    demo = sub.add_parser("demo", parents=[chat],
                          help="federated kPCA on the wine data with the papers' algorithms: "
                               "summary table, histories and plots")
    demo.add_argument("--rounds", type=_nonnegative_int, default=300,
                      help="rounds per algorithm (300)")
    demo.add_argument("--out", default="rfl_fast_demo", help="output folder (rfl_fast_demo)")
    demo.add_argument("--seed", type=_nonnegative_int, default=0, help="random seed (0)")
    demo.set_defaults(func=_demo)

    from .config import SCHEMA_HELP

    run = sub.add_parser("run", parents=[chat],
                         help="run an experiment file (TOML or YAML)",
                         description="Run the experiment described by CONFIG and write a "
                                     "results folder (config, histories, models, plots).",
                         epilog="experiment file keys:\n" + SCHEMA_HELP
                                + "\nexample: examples/config_kpca.toml in the source tree",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("config", metavar="CONFIG", help="experiment file (.toml, .yaml, .yml)")
    run.add_argument("--out", help="results folder (overrides the file's `out`)")
    run.add_argument("--rounds", type=_nonnegative_int, help="rounds (overrides the file)")
    run.add_argument("--seed", type=_nonnegative_int, help="seed (overrides the file)")
    run.add_argument("--no-plots", action="store_true", help="skip the figures")
    run.add_argument("--overwrite", action="store_true",
                     help="write into a results folder that is not empty (files of the "
                          "same name are replaced)")
    run.set_defaults(func=_run)

    from .experiments import EXPERIMENTS

    ids = f"{next(iter(EXPERIMENTS))}..{next(reversed(EXPERIMENTS))}"
    rep = sub.add_parser("reproduce", parents=[chat],
                         help=f"rerun one of the papers' experiments {ids}",
                         description=f"Rerun experiment {ids} of the source papers "
                                     "(rfl_fast.app.experiments.PAPERS; docs: references).")
    rep.add_argument("id", type=_experiment_id, metavar="ID", help=", ".join(EXPERIMENTS))
    rep.add_argument("--small", action="store_true", help="the fast version (seconds)")
    rep.add_argument("--out", help="results folder (default rfl_fast_results/ID)")
    rep.add_argument("--seed", type=_nonnegative_int, default=0, help="random seed (0)")
    rep.add_argument("--table", action="store_true",
                     help="print the results table (ours next to the paper's, with verdicts) "
                          "and write it as ID.md in the results folder")
    rep.set_defaults(func=_reproduce)

    sub.add_parser("info", parents=[chat],
                   help="versions, backends and thread settings (-q: one line; -v: also "
                        "Numba's compilation cache)").set_defaults(func=_info)
    # parsed by rfl_fast.app.bench itself (its own --help, -q and -v)
    sub.add_parser("bench", help="kernel timings of every backend against NumPy (--scaling: "
                                 "the kernels on 1, 2, 4, ... threads)", add_help=False)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2 with a message, --help 0
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    logger = logging.getLogger("rfl_fast")
    level = logger.level
    if args.quiet:  # also the package's notices (e.g. Numba compiling a kernel family)
        logger.setLevel(logging.ERROR)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"rfl-fast {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        _error(args.command, f"{type(exc).__name__}: {exc}"
               + ("" if getattr(args, "verbose", False) else " (--verbose for the traceback)"))
        return EXIT_FAILED
    finally:
        logger.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
