"""The freeze fence: a zombie engine -- its process frozen past Flink's heartbeat timeout, or
its task ended without closing it -- sends no more calls.

A TaskManager frozen (SIGSTOP, a VM pause, a stop-the-world pause) for longer than
``heartbeat.timeout`` is declared lost and its tasks restart elsewhere from the last checkpoint.
When it resumes, PyFlink's thread mode does not close the old task's Python function, so its
engine would go on with the runs it had, calling models, tools and sub-agents that the new
attempt calls too. Its store writes are fenced at restore (writer epochs); its calls need this.

A frozen process can tell it was frozen: its monotonic clock jumped. A watchdog thread ticks a
few times a second and records when it last ran; :meth:`FreezeFence.check`, made before every
call is sent and every store write, compares the clock with that tick. A gap above the threshold
(seen there, or by the watchdog itself, which latches it) means the process stood still longer
than the cluster tolerates: this engine is a zombie. The fence then stays tripped and raises
:class:`FrozenProcessError` at every check. A call already sent when the process froze cannot be
unsent; its outcome is not recorded either (the write after it is checked too).

The threshold is ``heartbeat.timeout - heartbeat.interval``: the JobManager counts the timeout
from the last heartbeat it heard, which may be up to one interval before the freeze began, so a
freeze that long may already have been declared lost. A shorter pause (a GC) never trips.

The same watchdog asks its owner whether the task that opened the engine still runs
(``task_alive``): thread mode does not call ``close()`` when a task is stopped with a savepoint,
cancelled or failed over, and without this the engine of a stopped job went on calling models
(76 calls measured after a stop-with-savepoint, docs/budgets.md). Once the task is gone the fence
trips with :class:`TaskEndedError` and calls ``on_task_ended`` once, from the watchdog thread, so
the owner can close the engine.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: How often the watchdog ticks (s): small against any threshold, cheap for an idle thread.
TICK_S = 0.2


class FrozenProcessError(BaseException):
    """This process was frozen longer than the fence's threshold: its engine is a zombie.

    A ``BaseException``, like ``asyncio.CancelledError``: no action's ``except Exception``, no
    error policy and no failed-call record may turn it into an outcome; it ends the engine,
    and with it the task.
    """

    def __init__(self, frozen_s: float, threshold_s: float) -> None:
        super().__init__(
            f"this process was frozen for {frozen_s:.1f} s, longer than the freeze fence's "
            f"{threshold_s:.1f} s (heartbeat.timeout - heartbeat.interval): Flink may have "
            "declared its TaskManager lost and restarted its task elsewhere, so this engine "
            "sends no more calls and writes nothing more"
        )
        self.frozen_s = frozen_s
        self.threshold_s = threshold_s


class TaskEndedError(BaseException):
    """The task that opened this engine has ended (stopped, cancelled or failed over) without
    closing it: the engine is an orphan and must not send or record anything more.

    A ``BaseException`` for the same reason as :class:`FrozenProcessError`.
    """

    def __init__(self) -> None:
        super().__init__(
            "the Flink task that ran this engine has ended (stopped, cancelled or failed over) "
            "without closing it: this engine sends no more calls and writes nothing more; its "
            "runs go on from the last checkpoint or savepoint wherever the job runs next"
        )


class FreezeFence:
    """Trips once the process is seen frozen for more than ``threshold_s`` seconds, or once
    ``task_alive`` says the engine's task has ended.

    :meth:`start` the watchdog, :meth:`check` before each call and store write, :meth:`stop`
    at close. ``clock`` (``time.monotonic``) and ``tick_s`` are there for tests; a test may also
    drive :meth:`tick` itself instead of starting the thread.
    """

    def __init__(
        self,
        threshold_s: float,
        *,
        task_alive: Callable[[], bool] | None = None,
        on_task_ended: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float = TICK_S,
    ) -> None:
        if threshold_s <= 0:
            raise ValueError("the freeze fence's threshold must be positive")
        self.threshold_s = threshold_s
        self._task_alive = task_alive
        self._on_task_ended = on_task_ended
        self._clock = clock
        self._tick_s = tick_s
        self._last_tick = clock()
        self._frozen_s: float | None = None  # latched: the freeze that tripped the fence
        self._task_ended = False  # latched too
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def tripped(self) -> bool:
        return self._frozen_s is not None or self._task_ended

    def start(self) -> None:
        """Start the watchdog thread (a daemon: it never holds the process)."""
        self._last_tick = self._clock()
        self._thread = threading.Thread(target=self._watch, name="flink-agents-freeze-fence")
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1)
        self._thread = None

    def check(self) -> None:
        """Raise :class:`FrozenProcessError` if the process was frozen past the threshold.

        One clock read and a compare. The tick is read before the latch: the watchdog latches a
        gap before it moves the tick on, so a check racing it sees one or the other.
        """
        gap = self._clock() - self._last_tick
        if gap > self.threshold_s or self._frozen_s is not None:
            raise FrozenProcessError(self._trip(gap), self.threshold_s)
        if self._task_ended:
            raise TaskEndedError

    def tick(self) -> None:
        """One watchdog step: latch a gap above the threshold, then record this tick; then ask
        whether the task still runs."""
        now = self._clock()
        gap = now - self._last_tick
        if gap > self.threshold_s:
            self._trip(gap)
        self._last_tick = now
        if self._task_alive is not None and not self._task_ended and not self._task_alive():
            self._task_ended = True  # the owner says so in its log, with what was in flight
            if self._on_task_ended is not None:
                try:
                    self._on_task_ended()
                except Exception:  # the fence holds either way; the watchdog must go on
                    logger.exception("the owner of an engine whose task ended failed to close it")

    def _watch(self) -> None:
        while not self._stopped.wait(self._tick_s):
            self.tick()

    def _trip(self, gap: float) -> float:
        """Latch ``gap`` (the first freeze seen) and log it; returns the latched freeze."""
        if self._frozen_s is None:
            self._frozen_s = gap
            logger.error("freeze fence tripped: %s", FrozenProcessError(gap, self.threshold_s))
        return self._frozen_s
