"""The ``rfl-fast`` console command.

Subcommands: ``demo``, ``run CONFIG``, ``reproduce ID`` (an id of ``experiments.EXPERIMENTS``),
``bench``, ``info``; each takes ``-q/--quiet`` and ``-v/--verbose``; ``rfl-fast
--version``. Exit codes: 0 success, 1 a run failed, 2 bad input (command line or experiment
file; nothing written), 130 interrupted by Ctrl-C (results so far written and marked).
"""

import argparse
import importlib.util
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


def _formats(args):
    """The figures' file formats: PNG, and PDF with ``--pdf``."""
    return ("png", "pdf") if getattr(args, "pdf", False) else ("png",)


def _have_matplotlib():
    return importlib.util.find_spec("matplotlib") is not None


def _demo(args):
    from .demo import run_demo
    from .runner import summary_table

    plot = not args.no_plots and _have_matplotlib()
    results = run_demo(args.rounds, out=args.out, seed=args.seed, plot=plot,
                       progress=_progress_bar(args.quiet), formats=_formats(args))
    if args.quiet:
        return EXIT_OK
    print(summary_table({name: res.history for name, res in results.items()}))
    shown = " and ".join(f"grad_norm.{ext}" for ext in _formats(args))
    print(f"histories (<algorithm>.csv){f' and the plot {shown}' if plot else ''} in {args.out}/")
    if not plot and not args.no_plots:
        print("install matplotlib (pip install matplotlib, or '.[cli]' in the source folder) "
              "for the plot")
    return EXIT_OK


def _run(args):
    from .config import ConfigError, load_plan
    from .runner import execute

    overrides = {"out": args.out, "rounds": args.rounds, "seed": args.seed,
                 "plots": [] if args.no_plots else None}
    try:
        plan = load_plan(args.config, overrides=overrides)
        outcome = execute(plan, overwrite=args.overwrite, progress=not args.quiet,
                          verbose=args.verbose, quiet=args.quiet, formats=_formats(args))
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
        print(_expectation(args.id, args.small, expected_seconds(args.id, small=args.small),
                           args.no_plots), flush=True)
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
    plots = [] if args.no_plots else _plot_experiment(args.id, res, out, args.quiet,
                                                       _formats(args))
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
    if seconds < 1:
        return "under 1 s"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _expectation(exp_id, small, seconds, no_plots):
    """What ``reproduce`` announces about its time: the small forms' measured time (checked
    within 2x by the tests), or for the full forms the measurement on record and the promise
    of an estimate from this run's own pace."""
    plots = "" if no_plots else "; then the plots (--no-plots skips them)"
    if seconds is None:
        return f"the runs' time is not on record: each finished run prints the time left{plots}"
    if small:
        return (f"expected: the runs take about {_duration(seconds)} on an idle 2-core machine "
                f"(measured){plots}")
    return (f"expected: the runs took {_duration(seconds)} when last measured on a 2-core "
            f"machine; each finished run prints the time left at this run's pace{plots}")


#: exp_id -> seconds at its first finished run (which also carries the process's warm-up:
#: imports, Numba's cached kernels), so the pace is taken from the runs after it.
_FIRST_DONE = {}


def _print_progress(exp_id, done, total, label, elapsed):
    """One line per finished run: runs done / total, elapsed, the run (setting_algorithm) and,
    while runs are left, the time left at the pace of the runs after the first (this
    command's own timing)."""
    if done <= 1:
        _FIRST_DONE[exp_id] = elapsed
    left = ""
    if 1 < done < total and exp_id in _FIRST_DONE:
        pace = (elapsed - _FIRST_DONE[exp_id]) / (done - 1)
        rest = pace * (total - done)
        left = f"  ({'under 1 s' if rest < 1 else f'about {_duration(rest)}'} left)"
    print(f"  {exp_id} [{done}/{total}] {_duration(elapsed):>8}  {label}{left}", flush=True)


def _plot_experiment(exp_id, res, out, quiet, formats=("png",)):
    """Plots of the histories an experiment wrote: per metric, one panel per setting, one line
    per run (:func:`rfl_fast.app.experiments.plots.plot_experiment`), announced with their
    count before and their time after (plotting can take longer than a small form's runs)."""
    try:
        import time

        from .experiments.plots import plot_experiment, plotted_figures

        t0 = time.perf_counter()
        n = plotted_figures(exp_id, res)
        if not quiet and n:
            print(f"plotting {n} figures ({', '.join(formats)}; --no-plots skips them) ...",
                  flush=True)
        files = plot_experiment(exp_id, res, out, formats=formats)
        if not quiet and files:
            print(f"{len(files)} plot files in {time.perf_counter() - t0:.1f} s", flush=True)
        return files
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


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose epilog may be a function, called only when the help is
    shown (``run``'s lists every key of an experiment file, which imports the federated layer:
    ``--help`` and every other command start without it)."""

    def format_help(self):
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def _run_epilog():
    from .config import SCHEMA_HELP

    return ("experiment file keys:\n" + SCHEMA_HELP
            + "\nexample: examples/config_kpca.toml in the source tree")


def _experiments_epilog():
    from .experiments import CITES, EXPERIMENTS, SOURCES

    return "experiments:\n" + "\n".join(
        f"  {key}  {'; '.join(CITES[paper] for paper in SOURCES[key])}" for key in EXPERIMENTS)


def build_parser():
    parser = _Parser(prog="rfl-fast", description="Riemannian federated learning: the papers' "
                                                  "algorithms on manifolds, with a compiled core")
    parser.add_argument("--version", action="version", version=f"rfl-fast {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    chat = argparse.ArgumentParser(add_help=False)
    level = chat.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", action="store_true", help="no progress bars or messages")
    level.add_argument("-v", "--verbose", action="store_true",
                       help="more detail (metrics during the run, tracebacks)")

    demo = sub.add_parser("demo", parents=[chat],
                          help="federated kPCA on the wine data with the papers' algorithms: "
                               "summary table, histories and plots",
                          description="Federated kPCA on scikit-learn's wine data (10 clients "
                                      "with label-skewed shares) with RFedAvg, RFedProx, "
                                      "RFedSVRG, RFedProj and RFedAGS from one start: a "
                                      "summary table, each algorithm's history (CSV) and a "
                                      "plot of the gradient norm.")
    demo.add_argument("--rounds", type=_nonnegative_int, default=300,
                      help="rounds per algorithm (300)")
    demo.add_argument("--out", default="rfl_fast_demo", help="output folder (rfl_fast_demo)")
    demo.add_argument("--seed", type=_nonnegative_int, default=0, help="random seed (0)")
    demo.add_argument("--no-plots", action="store_true", help="skip the plot")
    demo.add_argument("--pdf", action="store_true", help="also write the plot as PDF")
    demo.set_defaults(func=_demo)

    run = sub.add_parser("run", parents=[chat],
                         help="run an experiment file (TOML or YAML)",
                         description="Run the experiment described by CONFIG and write a "
                                     "results folder (config, histories, models, plots).",
                         epilog=_run_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("config", metavar="CONFIG", help="experiment file (.toml, .yaml, .yml)")
    run.add_argument("--out", help="results folder (overrides the file's out key)")
    run.add_argument("--rounds", type=_nonnegative_int, help="rounds (overrides the file)")
    run.add_argument("--seed", type=_nonnegative_int, help="seed (overrides the file)")
    run.add_argument("--no-plots", action="store_true",
                     help="skip the figures (drawing them can take longer than a small run)")
    run.add_argument("--pdf", action="store_true", help="also write each figure as PDF")
    run.add_argument("--overwrite", action="store_true",
                     help="write into a results folder that is not empty (files of the "
                          "same name are replaced)")
    run.set_defaults(func=_run)

    from .experiments import EXPERIMENTS

    ids = f"{next(iter(EXPERIMENTS))}..{next(reversed(EXPERIMENTS))}"
    rep = sub.add_parser("reproduce", parents=[chat],
                         help=f"rerun one of the papers' experiments {ids}",
                         description=f"Rerun experiment {ids} of the source papers (the "
                                     "docs' references page has each one's setting).",
                         epilog=_experiments_epilog,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument("id", type=_experiment_id, metavar="ID", help=", ".join(EXPERIMENTS))
    rep.add_argument("--small", action="store_true",
                     help="the small form the tests run (the command states its measured "
                          "time first)")
    rep.add_argument("--out", help="results folder (default rfl_fast_results/ID)")
    rep.add_argument("--seed", type=_nonnegative_int, default=0, help="random seed (0)")
    rep.add_argument("--no-plots", action="store_true",
                     help="skip the figures (up to 6 per experiment; drawing them can take "
                          "longer than a small form's runs)")
    rep.add_argument("--pdf", action="store_true", help="also write each figure as PDF")
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
