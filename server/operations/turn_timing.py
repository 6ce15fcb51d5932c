"""Where a turn's time goes, measured on the server (`--turn-timings`, off by default;
docs/operations.md "Turn timings", docs/performance.md "A turn's own time").

A MessageSession turn is marked at six points, and each phase is the time between two of them:

    accept    the handler begins (the envelope verified) -> the user event and the run committed
    queue     committed -> the session's worker takes the run (`Runtime.execute`)
    prepare   taken -> the provider's stream is asked for (history, messages, tool surface)
    provider  asked -> the stream ended: the last token (a turn with tool steps: all its model
              steps and tools, from the first step's start to the last step's end)
    finish    last token -> the assistant event durable (the run's ending committed)
    publish   durable -> the event, run, session and agent handed to the subscribers' queues

plus `own`, the whole less `provider` (the server's own time per turn), and `total`. Each is a
histogram, `seed_agents_turn_phase_seconds{phase}`, in `/metrics`; beside it,
`seed_agents_turn_phase_loop_cpu_seconds{phase}` is the event loop thread's CPU time in each phase
(the wall time less the waits: for the database writer's thread, the provider, other processes;
with one turn at a time it is that turn's, with several it includes the others' work meanwhile). Turns not started by a
MessageSession on this server (a retry, a trigger's, a run resumed after parking) and turns
that never reached the model are not counted.

Off, the runtime holds None instead of a TurnTimings, and every place that marks is one
`is not None` test: nothing is timed, kept or registered.
"""
from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Histogram

PHASES = ("accept", "queue", "prepare", "provider", "finish", "publish")
# The marks' places in a turn's record: PHASES[i] runs from mark i to mark i + 1.
ACCEPTED, COMMITTED, CLAIMED, PROVIDER_STARTED, LAST_TOKEN, DURABLE, PUBLISHED = range(7)
# 10 us to about 10 s, each bound 1.25 times the one before: a quantile read from the buckets
# (bench/turn_phases.py) is within about 12% of the true one.
BUCKETS = tuple(round(10e-6 * 1.25 ** i, 9) for i in range(63))
# Turns timed at once at most (a queue deeper than this drops its oldest records): the memory
# stays bounded whatever is queued or parked.
KEEP_OPEN = 10_000


class TurnTimings:
    def __init__(self, registry: CollectorRegistry, keep_open: int = KEEP_OPEN) -> None:
        self.keep_open = keep_open
        self.open: dict[str, list[int]] = {}   # run id -> 7 wall marks, then 7 loop-CPU marks
        histogram = Histogram("seed_agents_turn_phase_seconds", "A MessageSession turn's phases on this server "
                              "(--turn-timings): accept, queue, prepare, provider, finish, publish; own = all "
                              "but provider; total", ["phase"], registry=registry, buckets=BUCKETS)
        self._observe = [histogram.labels(phase).observe for phase in PHASES]
        self._own = histogram.labels("own").observe
        self._total = histogram.labels("total").observe
        cpu = Histogram("seed_agents_turn_phase_loop_cpu_seconds", "The event loop thread's CPU time in each "
                        "phase of a MessageSession turn (--turn-timings)", ["phase"], registry=registry,
                        buckets=BUCKETS)
        self._observe_cpu = [cpu.labels(phase).observe for phase in PHASES]
        self._own_cpu = cpu.labels("own").observe

    def accepted(self, run_id: str, accepted: tuple[int, int]) -> None:
        """A MessageSession's run is committed (its handler began at `accepted`, from `now()`)."""
        committed = time.perf_counter_ns()
        if len(self.open) >= self.keep_open:
            del self.open[next(iter(self.open))]   # the oldest record goes
        self.open[run_id] = [accepted[0], committed, 0, 0, 0, 0, 0, accepted[1], time.thread_time_ns(), 0, 0, 0, 0, 0]

    @staticmethod
    def now() -> tuple[int, int]:
        """(wall, the calling thread's CPU) in ns."""
        return time.perf_counter_ns(), time.thread_time_ns()

    def mark(self, run_id: str, index: int) -> None:
        """Mark `index` of the run's turn now. The claim and the provider's start keep their
        first time (a turn's first model step); the last token and the rest, their latest."""
        marks = self.open.get(run_id)
        if marks is not None and (index in (LAST_TOKEN, DURABLE, PUBLISHED) or not marks[index]):
            marks[index] = time.perf_counter_ns()
            marks[index + 7] = time.thread_time_ns()

    def finished(self, run_id: str) -> None:
        """The turn's ending is published: its phases are observed, and its record dropped."""
        marks = self.open.pop(run_id, None)
        if marks is None:
            return
        marks[PUBLISHED] = time.perf_counter_ns()
        marks[PUBLISHED + 7] = time.thread_time_ns()
        if not all(marks) or marks[LAST_TOKEN] < marks[PROVIDER_STARTED]:
            return   # never reached the model, or never heard its end
        wall, cpu = marks[:7], marks[7:]
        for observe, start, end in zip(self._observe, wall, wall[1:]):
            observe((end - start) / 1e9)
        for observe, start, end in zip(self._observe_cpu, cpu, cpu[1:]):
            observe((end - start) / 1e9)
        total = wall[PUBLISHED] - wall[ACCEPTED]
        self._total(total / 1e9)
        self._own((total - (wall[LAST_TOKEN] - wall[PROVIDER_STARTED])) / 1e9)
        self._own_cpu((cpu[PUBLISHED] - cpu[ACCEPTED] - (cpu[LAST_TOKEN] - cpu[PROVIDER_STARTED])) / 1e9)

    def provider(self, provider, run_id: str):  # noqa: ANN001, ANN201
        """`provider` with its stream timed for this run's turn."""
        return _TimedProvider(provider, self, run_id)


class _TimedProvider:
    __slots__ = ("_provider", "_timings", "_run_id")

    def __init__(self, provider, timings: TurnTimings, run_id: str) -> None:  # noqa: ANN001
        self._provider, self._timings, self._run_id = provider, timings, run_id

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._provider, name)

    async def stream(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        self._timings.mark(self._run_id, PROVIDER_STARTED)
        async for item in self._provider.stream(*args, **kwargs):
            yield item
        self._timings.mark(self._run_id, LAST_TOKEN)
