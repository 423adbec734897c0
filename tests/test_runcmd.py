"""runcmd: a command run in its own process group, stopped with memctl whenever memctl is stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memctl import errors

# A memctl that asks a command again and again (as a judge is asked, pair after pair) until it is stopped
ASKING = textwrap.dedent("""
    import faulthandler, signal, sys
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # (where it stands, should it not end)
    from memctl import errors, runcmd
    errors.stop_raising(signal.SIGTERM, signal.SIGHUP)
    try:
        print("ready", flush=True)
        with errors.stops_noted() as stop_if_asked:  # as judge.py and distill.py ask
            while True:
                stop_if_asked()
                runcmd.run_command(["sh", "-c", "cat >/dev/null; echo same"], "a or b?", 30)
    except errors.Interrupted as exc:
        sys.exit(exc.exit_code)
""")


def test_a_stop_that_lands_anywhere_in_asking_ends_memctl_as_stopped(tmp_path):
    """A SIGTERM that landed while the command's reading threads were starting was raised inside
    threading's own lock and broke it: memctl died of a RuntimeError (exit 1) instead of Interrupted
    (exit 143), and the full suite failed on it once. The stop is now noted and raised where runcmd
    can clean up. Stops sent at spread moments of the asking loop must each end it as stopped."""
    env = {**os.environ, "PYTHONPATH": str(Path(errors.__file__).parent.parent)}  # (the memctl under test)
    codes = []
    for round_ in range(40):
        proc = subprocess.Popen([sys.executable, "-c", ASKING], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.005 * (round_ % 20))  # from the first command's start to some way into the loop
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.kill()
            pytest.fail(f"round {round_}: memctl did not end after its SIGTERM:\n{proc.communicate()[1]}")
        codes.append(proc.returncode)
        assert proc.returncode == 128 + signal.SIGTERM, err
    assert codes == [143] * 40


def test_a_noted_stop_is_raised_where_it_is_checked():
    with errors.stops_noted() as stop_if_asked:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)  # (a handler runs between two bytecodes of the main thread)
        with pytest.raises(errors.Interrupted) as stopped:
            stop_if_asked()
        stop_if_asked()  # raised once
    assert stopped.value.exit_code == 128 + signal.SIGTERM


def test_a_noted_ctrl_c_is_a_keyboard_interrupt_and_wins_over_the_error_in_flight(ctrl_c_reaches_us):
    with pytest.raises(KeyboardInterrupt) as stopped:
        with errors.stops_noted():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            raise subprocess.TimeoutExpired(["judge"], 5)  # (a timeout must not turn a stop into an answer)
    assert not isinstance(stopped.value, errors.Interrupted)


def test_a_terminate_wins_over_a_ctrl_c_and_an_ignored_signal_stays_ignored(ctrl_c_reaches_us):
    import signal as sig

    before = sig.signal(sig.SIGHUP, lambda signum, frame: None)  # (the suite may run under nohup: SIGHUP ignored)
    try:
        with pytest.raises(BaseException) as stopped:  # (a KeyboardInterrupt that escaped would end the suite)
            with errors.stops_noted():
                os.kill(os.getpid(), sig.SIGINT)
                os.kill(os.getpid(), sig.SIGHUP)
                time.sleep(0.01)
    finally:
        sig.signal(sig.SIGHUP, before)
    assert isinstance(stopped.value, errors.Interrupted) and stopped.value.exit_code == 128 + sig.SIGHUP
    before = sig.signal(sig.SIGHUP, sig.SIG_IGN)  # nohup's
    try:
        with errors.stops_noted():
            os.kill(os.getpid(), sig.SIGHUP)
            time.sleep(0.01)
        assert sig.getsignal(sig.SIGHUP) is sig.SIG_IGN
    finally:
        sig.signal(sig.SIGHUP, before)


def test_the_handlers_before_are_back_after():
    before = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with errors.stops_noted():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {n: signal.getsignal(n) for n in before} == before


def test_every_handler_goes_back_even_when_a_signal_lands_between_two(monkeypatch, ctrl_c_reaches_us):
    """A Ctrl-C right after the first handler was put back raised inside the loop that puts them back:
    the others stayed noting, and every later SIGTERM was swallowed (helper-90)."""
    import signal as sig

    real = sig.signal
    seen: list[int] = []

    def landing(number, handler):
        done = real(number, handler)
        seen.append(number)
        if seen.count(number) == 2 and number == seen[0] and len(seen) > 2:  # the first one back: a Ctrl-C lands
            raise KeyboardInterrupt
        return done

    numbers = (sig.SIGINT, sig.SIGTERM, sig.SIGHUP)
    before = {n: sig.getsignal(n) for n in numbers}
    monkeypatch.setattr(sig, "signal", landing)
    with pytest.raises(KeyboardInterrupt):
        with errors.stops_noted():
            pass
    monkeypatch.undo()
    assert seen.count(seen[0]) >= 2 and len(seen) > 2  # (it landed)
    assert {n: sig.getsignal(n) for n in numbers} == before


def test_a_stop_noted_by_an_outer_block_is_raised_by_the_inner_one_s_check():
    """runcmd's block inside the judge's: a stop that landed as the inner block put its handlers in place
    went to the outer one's list, and was raised only after the command ended (up to judge_timeout)."""
    asked_on = []
    with pytest.raises(errors.Interrupted):
        with errors.stops_noted():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)
            with errors.stops_noted() as stop_if_asked:
                stop_if_asked()
                asked_on.append("the command")  # (the outer block would still raise it, later)
    assert asked_on == []
