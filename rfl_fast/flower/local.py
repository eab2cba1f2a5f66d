"""A real Flower deployment on this machine: one SuperLink and n SuperNode processes on
127.0.0.1 (Flower's deployment engine, each process talking HTTP over loopback), for tests,
demos and trying a federation before spreading it over machines.

>>> with LocalFederation(n_nodes=3) as fed:                       # doctest: +SKIP
...     out = fed.run(run_config={"algorithm": "RFedSVRG", ...})
...     out["iterates"]

Every process is started in its own session with a bounded start-up wait; :meth:`close`
(also on ``with`` exit and at garbage collection) stops the processes it started and their
descendants (SIGTERM, then SIGKILL after a grace period). Ports are picked free at runtime on
127.0.0.1; ``FLWR_HOME`` is a temporary folder, telemetry and update checks are off.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

from ..federation.history import History
from .app import write_app, write_run_config

__all__ = ["LocalFederation", "free_port", "flower_env"]

HOST = "127.0.0.1"


def free_port():
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def flower_env(flwr_home):
    """Environment for Flower processes: ``FLWR_HOME``, no telemetry, no update check, this
    rfl_fast importable (its parent folder first on ``PYTHONPATH``) and this Python's scripts
    folder first on ``PATH`` (Flower starts ``flower-superexec`` by name: the venv's must be found
    even when the venv is not activated)."""
    env = dict(os.environ)
    scripts = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([scripts] + [p for p in env.get("PATH", "").split(os.pathsep)
                                               if p and p != scripts])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in
                                                  env.get("PYTHONPATH", "").split(os.pathsep)
                                                  if p])
    env.update(FLWR_HOME=str(flwr_home), FLWR_TELEMETRY_ENABLED="0",
               FLWR_DISABLE_UPDATE_CHECK="1", PYTHONUNBUFFERED="1")
    return env


def _bin(name):
    """The console script ``name`` next to this Python (else on PATH)."""
    cand = os.path.join(os.path.dirname(sys.executable), name)
    return cand if os.path.exists(cand) else (shutil.which(name) or name)


def _children():
    """ppid -> [pid] of the processes visible in /proc (empty where /proc is missing)."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out


def _descendants(pid):
    tree, out, todo = _children(), [], [pid]
    while todo:
        for c in tree.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    try:   # a zombie of ours counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class LocalFederation:
    """SuperLink + ``n_nodes`` SuperNodes on 127.0.0.1 (see the module docstring).

    Parameters
    ----------
    n_nodes : int
        SuperNodes to start; node ``i`` gets ``--node-config "partition-id=i
        num-partitions=n"`` (plus ``node_configs[i]`` if given).
    node_configs : list of dict, optional
        Extra node config per node (e.g. ``{"data-path": "..."}``).
    workdir : str, optional
        Folder for ``FLWR_HOME``, logs, the app and outputs (default: a new temporary folder,
        removed on close).
    startup_timeout : float
        Seconds to wait for the SuperLink's health endpoint.
    env : dict, optional
        Extra environment variables of the Flower processes, e.g. Flower's
        ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` (how often a SuperNode's SuperExec looks for a
        ClientApp task to start; Flower's default 1 s).
    """

    def __init__(self, n_nodes, node_configs=None, workdir=None, startup_timeout=60.0,
                 env=None):
        self.n_nodes = int(n_nodes)
        self._own_dir = workdir is None
        self.workdir = tempfile.mkdtemp(prefix="rfl_flower_") if workdir is None else workdir
        self.home = os.path.join(self.workdir, "flwr_home")
        os.makedirs(self.home, exist_ok=True)
        self.env = {**flower_env(self.home), **{str(k): str(v) for k, v in (env or {}).items()}}
        self.procs = {}           # name -> Popen
        self._logs = []
        self.port = None
        self.node_ports = []
        try:
            self._start(node_configs or [{}] * self.n_nodes, startup_timeout)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ processes
    def _spawn(self, name, args):
        log = open(os.path.join(self.workdir, f"{name}.log"), "wb")
        self._logs.append(log)
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env,
                                            cwd=self.workdir, start_new_session=True)
        return self.procs[name]

    def _start(self, node_configs, timeout):
        self.port = free_port()
        with open(os.path.join(self.home, "config.toml"), "w") as f:
            f.write(f'[superlink]\ndefault = "local-test"\n\n[superlink.local-test]\n'
                    f'address = "{HOST}:{self.port}"\ninsecure = true\n')
        self._spawn("superlink", [_bin("flower-superlink"), "--insecure", "--host", HOST,
                                  "--port", str(self.port),
                                  "--disable-runtime-dependency-installation"])
        deadline = time.monotonic() + timeout
        while True:
            if self.procs["superlink"].poll() is not None:
                raise RuntimeError(f"flower-superlink exited: {self.log('superlink')[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://{HOST}:{self.port}/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"flower-superlink not ready after {timeout:g} s: "
                                       f"{self.log('superlink')[-2000:]}") from None
                time.sleep(0.3)
        for i in range(self.n_nodes):
            port = free_port()
            self.node_ports.append(port)
            cfg = {"partition-id": i, "num-partitions": self.n_nodes, **node_configs[i]}
            text = " ".join(f"{k}={json.dumps(v)}" for k, v in cfg.items())
            self._spawn(f"supernode{i}", [_bin("flower-supernode"), "--insecure",
                                          "--superlink", f"{HOST}:{self.port}",
                                          "--host", HOST, "--port", str(port),
                                          "--node-config", text])

    def log(self, name):
        """The output of process ``name`` (``"superlink"``, ``"supernode0"``, ...)."""
        try:
            with open(os.path.join(self.workdir, f"{name}.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, name, sig=signal.SIGKILL):
        """Stop process ``name`` and its descendants (e.g. a SuperNode "crashing")."""
        p = self.procs.get(name)
        if p is None:
            return
        pids = [p.pid] + _descendants(p.pid)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            p.kill()
            p.wait(timeout=10)
        self._reap(pids[1:])

    @staticmethod
    def _reap(pids, grace=10.0):
        deadline = time.monotonic() + grace
        while any(_alive(q) for q in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        for q in pids:
            if _alive(q):
                try:
                    os.kill(q, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def close(self):
        """Stop every process started here and their descendants; remove the temporary
        folder (if this object created it).

        SIGTERM to the started processes first (Flower stops and reaps its own children),
        then SIGTERM and, after a grace period, SIGKILL to any descendant still running.
        """
        procs, self.procs = self.procs, {}
        pids = []
        for p in procs.values():
            pids += _descendants(p.pid)
        for p in procs.values():
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:  # pragma: no cover
                pass
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        for pid in pids:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        self._reap(pids)
        for log in self._logs:
            log.close()
        self._logs = []
        if self._own_dir and os.path.isdir(self.workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self.procs:
            self.close()

    # ------------------------------------------------------------------ runs
    def run(self, run_config, timeout=300.0, name=None, module=None, wait_for="history.json"):
        """Run the rfl_fast app with ``run_config`` (overrides of the app's defaults) and
        wait for it; returns ``{"iterates", "x", "x0", "history", "wall"}`` (``history``: a
        :class:`~rfl_fast.federation.History`). Outputs go to ``<workdir>/out_<name>``
        (``name`` default ``run1``, ``run2``, ...).

        ``module``: the source of the app's module ``rfl_fast_app.py`` (its ``server`` and
        ``client``), default rfl_fast's own two lines (e.g. one registering its own tasks, or
        a test's hostile ServerApp). A run whose ServerApp writes ``wait_for`` into
        ``output-dir`` other than ``history.json`` returns ``{"out", "wall"}`` once it appears.

        Raises ``RuntimeError`` with the logs if the run fails or exceeds ``timeout``.
        """
        self._runs = getattr(self, "_runs", 0) + 1
        name = name or f"run{self._runs}"
        app = os.path.join(self.workdir, "app")
        out = os.path.join(self.workdir, f"out_{name}")
        shutil.rmtree(out, ignore_errors=True)
        cfg = {**run_config, "output-dir": out}
        write_app(app, cfg, overwrite=True)
        if module is not None:
            with open(os.path.join(app, "rfl_fast_app.py"), "w") as fh:
                fh.write(module)
        over = write_run_config(os.path.join(self.workdir, f"{name}.toml"), cfg)
        w0 = time.perf_counter()
        cmd = [_bin("flwr"), "run", app, "local-test", "--run-config", over, "--stream"]
        logf = os.path.join(self.workdir, f"{name}.log")
        with open(logf, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env, cwd=self.workdir,
                                    start_new_session=True)
            self.procs[f"flwr-{name}"] = proc
            result = os.path.join(out, wait_for)
            deadline = time.monotonic() + timeout
            try:
                while not (os.path.exists(result) or os.path.exists(os.path.join(out,
                                                                                  "error.txt"))):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"run {name!r} did not finish in {timeout:g} s")
                    if proc.poll() is not None and proc.returncode != 0:
                        raise RuntimeError(f"flwr run exited with {proc.returncode}")
                    time.sleep(0.3)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}\n--- flwr run:\n{self.log(name)[-3000:]}\n"
                                   f"--- superlink:\n{self.log('superlink')[-3000:]}") from None
            finally:
                self.stop(f"flwr-{name}", signal.SIGTERM)
                self.procs.pop(f"flwr-{name}", None)
        if os.path.exists(os.path.join(out, "error.txt")):
            with open(os.path.join(out, "error.txt")) as f:
                raise RuntimeError(f"the ServerApp failed: {f.read()}\n--- flwr run:\n"
                                   f"{self.log(name)[-3000:]}")
        if wait_for != "history.json":
            return {"out": out, "wall": time.perf_counter() - w0}
        with np.load(os.path.join(out, "result.npz")) as z:
            arrays = {k: z[k] for k in z.files}
        return {**arrays, "history": History.from_json(result), "wall": time.perf_counter() - w0}
