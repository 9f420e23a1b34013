"""Imported (as `sitecustomize`, from PYTHONPATH) only by a worker the chaos suite runs under
libfaketime (chaos/nemesis.py, `clock-skew`): owns that worker's `time.sleep`.

libfaketime 0.9.10 fakes either both clocks or, with FAKETIME_DONT_FAKE_MONOTONIC=1, the wall
clock alone. Faking the monotonic clock hangs every timed lock wait (glibc's sem_clockwait is
not intercepted; libfaketime issue 390); keeping it true turns Python 3.11's `time.sleep`
(clock_nanosleep on CLOCK_MONOTONIC with TIMER_ABSTIME) into EINVAL (issue 426). The worker
keeps a true monotonic clock, and sleeps with `select`, a relative timeout.
"""

import select
import time
from typing import SupportsIndex


def _sleep(secs: float | SupportsIndex) -> None:
    seconds = float(secs)
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


time.sleep = _sleep
