"""`memctl run-job NAME`: what launchd and cron call for each job (docs/JOBS.md).

It takes the job's lock and the store's turn (a store's jobs run one at a time), ends what a killed
run of the job left running, refuses a job whose command or script waits for approval (trust.py),
runs the job in its own process with every line logged with a timestamp to `logs/<name>.log`,
forwards a stop to it, and on failure records an `error` episode, so that a failing job leaves a
trace that `episode recall` and `doctor` find. The declarations, rendering, installing and status
of jobs are jobs.py's.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from . import clock, errors, procs, trust
from .errors import BadInput, LockTimeout, MemctlError, NotFound, Refused
from .fsutil import atomic_write, file_lock, link_on_way, refuse_link, seconds_setting
from .jobs import (ENDING, EPISODE_TAIL_CHARS, JOB_NAME_RE, TAIL_LINES, WAITING, Job, JobRunning, get_job, job_lock,
                   jobs_folder, lock_holder, log_path, resolve_environment, script_path, job_table)
from .store import Store


@dataclass(frozen=True)
class RunResult:
    job: str
    exit_code: int
    started: str
    seconds: float
    log: Path
    tail: tuple[str, ...]
    episode: str | None = None  # id of the error episode recorded on failure
    episode_error: str | None = None  # why it could not be recorded


class _Log:
    """Timestamped lines appended to logs/<name>.log, flushed one by one (a crash keeps what was said)."""

    def __init__(self, path: Path, name: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.name, self.path = name, path
        self.handle = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666), "ab")

    def write(self, text: str) -> None:
        with self._named():
            for line in text.split("\n"):
                self.handle.write(f"{clock.stamp()} {self.name} {line}\n".encode("utf-8", "replace"))
            self.handle.flush()

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """An OSError of the log names it: on a full disk, the one line run-job leaves on stderr says which file."""
        try:
            yield
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(self.path)
            raise

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.fsync(self.handle.fileno())
        with self._named():
            self.handle.close()  # (flushes what a failed write left in the buffer: it fails again, on a full disk)


def job_argv(store: Store, job: Job) -> list[str]:
    if job.command:
        # The same interpreter as this run-job: no PATH lookup can pick another memctl.
        return [sys.executable, "-m", "memctl", "--root", str(store.root), *job.command]
    return [str(script_path(store, job)), *job.args]


def _child_env(store: Store, job: Job) -> dict[str, str]:
    env = dict(os.environ)
    extra = resolve_environment().path.split(":")
    have = env.get("PATH", "").split(":") if env.get("PATH") else []
    env["PATH"] = ":".join(dict.fromkeys([*have, *extra]))
    env["MEMCTL_ROOT"] = str(store.root)
    env["MEMCTL_JOB"] = job.name
    if not _within_turn(_turn_path(store)):  # (within its starter's turn, its own jobs are too)
        env[TURN_VARIABLE] = f"{_turn_path(store)}:{os.getpid()}"
    return env


def log_not_run(root: Path, name: str, error: MemctlError) -> None:
    """A job that cannot even be read (memctl.toml does not load, its table is wrong, it is gone): say so in
    its logs/NAME.log, where `tail -f` and the next look at the job find it (cron's stderr file is otherwise
    the only trace). Best effort."""
    path = root / "logs" / f"{name}.log"
    if not JOB_NAME_RE.match(name) or link_on_way(root, path) is not None or not path.is_file():
        return  # only a job that has run here has a log to look in; bad input creates no file
    with contextlib.suppress(OSError):
        log = _Log(path, name)
        try:
            log.write(f"refused: {error.one_line()}; the job was not run")
        finally:
            log.close()


def run_job(store: Store, name: str, *, echo: Callable[[str], None] | None = None,
            note: Callable[[str], None] | None = None) -> RunResult:
    """Run one job under its lock and the store's turn, log it, and record an `error` episode when it
    fails. `echo` gets each line the job prints; `note`, what run-job waits for."""
    try:
        job = get_job(store, name)
    except MemctlError as exc:
        log_not_run(store.root, name, exc)
        raise
    lock = job_lock(store, job.name)
    refuse_link(store.root, log_path(store, job.name))  # logs/ is machine-local: a link there came from elsewhere
    log = _Log(log_path(store, job.name), job.name)
    try:
        try:
            _refuse_unapproved(store, job)
            wait = seconds_setting("MEMCTL_JOB_WAIT", TURN_WAIT_SECONDS)
        except (Refused, BadInput) as exc:
            log.write(f"refused: {exc.one_line()}")
            raise
        held = contextlib.ExitStack()
        try:
            try:
                held.enter_context(file_lock(lock, timeout=0))
            except LockTimeout:
                if not lock_holder(lock).endswith(ENDING):
                    raise
                held.enter_context(file_lock(lock, timeout=ENDING_WAIT))  # another job ends what its killed run left
        except LockTimeout:
            holder = lock_holder(lock)
            doing, pid = ("waiting for its turn" if holder.endswith(WAITING) else "running"), holder.removesuffix(WAITING)
            log.write(f"skip: already {doing} (pid {pid})")
            raise JobRunning(f"job {job.name} is already {doing} (pid {pid}); this copy did not start it",
                             hint="memctl schedule status") from None
        with held:
            _end_leftovers(_run_file(store, job), log)
            with _store_turn(store, job, log, wait, note):
                store, job = _approved_still(store, job.name, log)  # a sync may have merged while it waited
                _end_others_leftovers(store, job, log)
                return _run_locked(store, job, log, echo)
    finally:
        log.close()


def _refuse_unapproved(store: Store, job: Job) -> None:
    """What a commit not made here changed waits for `memctl trust` (memctl/trust.py); a script in the
    store reached through a symbolic link is not run (what runs could not be checked)."""
    trust.refuse_waiting(store, [f"jobs.{job.name}", f"jobs.{job.name}{trust.SCRIPT_SUFFIX}"], "the job was not run")
    script = trust.scripts(store, store.config.raw).get(f"jobs.{job.name}{trust.SCRIPT_SUFFIX}")
    if script is not None and script.link is not None:
        raise Refused(f"{job_table(job.name)} script {job.script!r} is reached through a symbolic link in the repository "
                      f"({script.link}); the job was not run", kind="link",
                      hint="name the script's real path in memctl.toml, or put the file itself in the store")


def _approved_still(store: Store, name: str, log: "_Log") -> tuple[Store, Job]:
    """The store and job as they are once the turn is taken, checked again: a sync job ahead of this one may
    have merged a new memctl.toml or script while it waited."""
    from .store import open_store  # noqa: PLC0415

    try:
        store = open_store(store.root)
        job = get_job(store, name)
        _refuse_unapproved(store, job)
    except (Refused, BadInput, NotFound) as exc:
        log.write(f"refused: {exc.one_line()}")
        raise
    return store, job


TURN_WAIT_SECONDS = 3600.0  # how long a job waits for another job of its store (MEMCTL_JOB_WAIT)
TURN_VARIABLE = "MEMCTL_JOB_TURN"  # in a job's environment: the turn lock it runs within
ENDING_WAIT = 10.0  # seconds a run-job waits for that (_end_leftovers: SIGTERM, 2 s, SIGKILL, 2 s)


def _turn_path(store: Store) -> Path:
    return Path(os.path.realpath(jobs_folder(store) / ".turn.lock"))  # (no job is named with a dot)


@contextlib.contextmanager
def _store_turn(store: Store, job: Job, log: _Log, wait: float, note: Callable[[str], None] | None) -> Iterator[None]:
    """The jobs of one store run one at a time. Cron starts every job due in a minute at once, and a
    doctor beside a state update found STATE.md written and not yet committed. A job waits for the
    one running (a `wait:` line in its log), up to `wait` seconds, then does not start (`skip:`, exit 4).
    A run-job started by a job of this store, while that job holds the turn, runs within it."""
    turn = _turn_path(store)
    lock = job_lock(store, job.name)
    me = f"job {job.name} (pid {os.getpid()})"
    with contextlib.ExitStack() as held:
        try:
            try:
                held.enter_context(file_lock(turn, timeout=0, holder=me))
            except LockTimeout:
                if _within_turn(turn):
                    yield  # the job that started this run-job holds the turn
                    return
                other = lock_holder(turn)
                log.write(f"wait: {other} is running; this run starts after it")
                if note:
                    note(f"job {job.name} waits for {other} to end (at most {wait:g} s, MEMCTL_JOB_WAIT)")
                lock.write_text(f"{os.getpid()}{WAITING}\n")
                try:
                    with errors.stops_raise(signal.SIGTERM, signal.SIGHUP):
                        held.enter_context(file_lock(turn, timeout=wait, holder=me))
                except LockTimeout:
                    other = lock_holder(turn)
                    log.write(f"skip: {other} still running after {wait:g} s")
                    raise JobRunning(f"{other} of this store still runs after {wait:g} s; job {job.name} "
                                     "was not started", hint="memctl schedule status") from None
                except KeyboardInterrupt as exc:
                    code = exc.exit_code if isinstance(exc, errors.Interrupted) else errors.INTERRUPTED
                    log.write(f"stop: run-job got {signal.Signals(code - 128).name} while it waited for its turn; "
                              "the job was not run")
                    raise
        except MemctlError as exc:  # the lock is not a regular file, say: every run is refused, said in its log
            if not isinstance(exc, LockTimeout):
                log.write(f"refused: {exc.one_line()}")
            raise
        lock.write_text(f"{os.getpid()}\n")
        yield


def _within_turn(turn: Path) -> bool:
    """Whether this run-job was started by the job that holds `turn` now: MEMCTL_JOB_TURN names that
    lock and its holder's pid (a process a job left running in the background, started again later,
    finds another holder there)."""
    path, _, pid = os.environ.get(TURN_VARIABLE, "").rpartition(":")
    return path == str(turn) and pid.isdigit() and lock_holder(turn).endswith(f"(pid {pid})")


def _end_others_leftovers(store: Store, job: Job, log: _Log) -> None:
    """What the killed run-job of another job left running would run beside this one: ended first (the
    next run of that job would only end it then). A job whose lock is held is alive, and ends its own."""
    for run_file in sorted(jobs_folder(store).glob("*.run")):
        other = run_file.stem
        if other == job.name or not JOB_NAME_RE.match(other):
            continue
        try:
            with file_lock(job_lock(store, other), timeout=0, holder=f"{os.getpid()}{ENDING}"):
                _end_leftovers(run_file, log, f"job {other}'s last run-job")
        except MemctlError:  # held (its run-job lives), or not a regular file (doctor names it)
            continue


def _run_locked(store: Store, job: Job, log: _Log, echo: Callable[[str], None] | None) -> RunResult:
    argv = job_argv(store, job)
    started = clock.stamp()
    log.write(f"start pid={os.getpid()} cmd={shlex.join(argv)}")
    began = time.monotonic()
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    run_file = _run_file(store, job)
    run_id = os.urandom(8).hex()
    try:
        atomic_write(run_file, run_id + "\n")  # gone at the run's end: found by the next run, this one was killed
    except OSError:  # a full disk: the job runs all the same (what a killed run leaves is then not ended)
        pass
    try:
        # A session of its own: a stop sent to run-job reaches the job's whole process tree through
        # _forwarding_stops, and run-job (holding the job's lock) waits until the tree has ended.
        child = subprocess.Popen(argv, cwd=store.root, env={**_child_env(store, job), RUN_VARIABLE: run_id},
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=_dies_with_parent())
    except OSError as exc:
        # 126/127: what a shell says for "cannot execute" and "not found".
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        message = f"cannot start {argv[0]}: {exc.strerror or exc}"
        log.write(f"| {message}")
        tail.append(message)
    else:
        assert child.stdout is not None
        with _forwarding_stops(child, log):
            for raw in child.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                log.write(f"| {line}")
                tail.append(line)
                if echo:
                    echo(line)
            code = child.wait()
        if code < 0:
            code = 128 - code  # killed by a signal, as a shell reports it
    with contextlib.suppress(OSError):
        run_file.unlink(missing_ok=True)
    seconds = time.monotonic() - began
    log.write(f"end exit={code} seconds={seconds:.2f}")
    result = RunResult(job.name, code, started, seconds, log_path(store, job.name), tuple(tail))
    if code == 0:
        return result
    try:
        episode = _record_episode(store, job, result)
    except (MemctlError, OSError) as exc:  # a full disk too: the job's own exit code is what run-job reports
        why = exc.one_line() if isinstance(exc, MemctlError) else errors.from_os_error(exc).one_line()
        with contextlib.suppress(OSError):
            log.write(f"episode not recorded: {why}")
        return RunResult(**{**result.__dict__, "episode_error": why})
    log.write(f"episode {episode}")
    return RunResult(**{**result.__dict__, "episode": episode})


STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
RUN_VARIABLE = "MEMCTL_JOB_RUN"  # in the environment of every process of one run: what the next run may end


def _run_file(store: Store, job: Job) -> Path:
    return jobs_folder(store) / f"{job.name}.run"


def _end_leftovers(run_file: Path, log: _Log, whose: str = "the last run's run-job") -> None:
    """A run whose run-job was killed with SIGKILL left its `.run` file, and maybe processes: the job's
    shell got SIGTERM (PR_SET_PDEATHSIG), but a command it was running lives on without the lock. The
    next run ends them (SIGTERM, then SIGKILL) before it starts, and says so: only processes of that
    run (its MEMCTL_JOB_RUN in their environment, read in /proc; elsewhere nothing is found)."""
    try:
        run_id = run_file.read_text(encoding="utf-8").strip()
    except OSError:
        return
    left = _processes_of(run_id) if run_id else []
    pids = list(left)
    for number in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, number)
        deadline = time.monotonic() + 2
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if procs.alive(pid)]
            time.sleep(0.02)
        if not pids:
            break
    if left:
        log.write(f"stop: {whose} was killed (SIGKILL) while its job ran; ended what it left running "
                  f"(pid {', '.join(map(str, left))})" + (f"; still running: {', '.join(map(str, pids))}" if pids else ""))
    with contextlib.suppress(OSError):
        run_file.unlink(missing_ok=True)


def _processes_of(run_id: str) -> list[int]:
    """The processes whose environment holds MEMCTL_JOB_RUN=run_id (Linux's /proc; [] elsewhere)."""
    wanted = f"{RUN_VARIABLE}={run_id}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if wanted in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


@contextlib.contextmanager
def _forwarding_stops(child: subprocess.Popen, log: _Log) -> Iterator[None]:
    """SIGTERM, SIGINT or SIGHUP to run-job (launchd stopping it, a Ctrl-C, a closed terminal) go on to the
    job's process group; run-job goes on logging until the job has ended, so its lock is held as long as
    the job runs, and the run ends with its `end` line and error episode. A second stop sends SIGKILL."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return
    stops: list[int] = []

    def forward(signum: int, _frame) -> None:  # no logging here: it may interrupt a log write
        stops.append(signum)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum if len(stops) == 1 else signal.SIGKILL)

    previous = {stop: signal.signal(stop, forward) for stop in STOPS}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
        for number, stop in enumerate(stops):
            log.write(f"stop: run-job got {signal.Signals(stop).name}; "
                      + ("sent it to the job" if number == 0 else "killed the job (SIGKILL)"))


def _dies_with_parent() -> Callable[[], None] | None:
    """Linux: the job gets SIGTERM when run-job itself is killed (SIGKILL cannot be forwarded), so no job
    outlives the lock that keeps a second copy from starting beside it. Elsewhere: None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # noqa: PLC0415

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG; resolved before fork: nothing to import after it


def _record_episode(store: Store, job: Job, result: RunResult) -> str:
    """An `error` episode for a run that failed; a `success` one for a run that found something (found_exit): not
    `feedback`, which is a person's, weighs 0.9 and is never forgotten (docs/LIFECYCLE.md)."""
    from . import episodes  # noqa: PLC0415

    rel = store.rel(result.log)
    outcome = f"exit {result.exit_code} after {result.seconds:.1f}s; last lines of {rel}:\n" + "\n".join(result.tail)
    if len(outcome) > EPISODE_TAIL_CHARS:
        outcome = "…" + outcome[-EPISODE_TAIL_CHARS:]
    found = job.succeeded(result.exit_code)
    episode = episodes.add(
        store, f"job {job.name} " + (f"found something (exit {result.exit_code})" if found else f"failed with exit {result.exit_code}"),
        "success" if found else "error", agent=f"job:{job.name}", outcome=outcome, tags=("job", job.name),
    )
    return episode.id
