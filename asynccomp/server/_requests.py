"""What the compile server does with one client's requests, on its one scheduler.

A client's ``compile`` request opens a call of the server's
:class:`~asynccomp._scheduler.local.Scheduler` with its first jobs; more may follow in
``jobs`` messages, until one says ``end`` (each job checked here: one of this server's
backends, an architecture its compiler takes, rendered for its toolkit). The call's
events (a job started, a job's outcome) are gathered as they happen and go back in
``results`` messages, as many as the session's writer finds ready at once in one
message (of at most :data:`PACK_BYTES`), the last saying ``end``: a one-job call
answered from the cache is one message in and one out. ``cancel`` stops a call (and
nobody else's); ``warm_up``, ``make_pch``, ``status`` and ``stop`` are answered by id,
while calls run.

A request of the wrong shape, or a job this server will not run, is refused with an
``error`` naming the request; the connection goes on.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc

from .._scheduler.local import Counting, Scheduler, Tally
from ..backends import PreparedCompile, arch_supported, backend_class
from ..job import MAX_SOURCE_CHARS, parse_arch
from ..runner import CompileRequest, Outcome
from ..toolkit import Toolkit
from ._forms import outcome_form, prepared_of
from ._protocol import (
    Cancel,
    Compile,
    Error,
    Jobs,
    JobSpec,
    MakePch,
    OutcomeSpec,
    PchMade,
    Results,
    Status,
    StatusReply,
    Stop,
    Stopping,
    WarmedUp,
    WarmUp,
    parse,
    request_id,
)
from ._wire import Message, WireError

__all__ = (
    "FEED",
    "MIN_IN_FLIGHT",
    "PACK_BYTES",
    "Host",
    "Poster",
    "Requests",
    "in_flight_limit",
)


class Host(Protocol):
    """What a client's requests need of the server that runs them."""

    @property
    def scheduler(self) -> Scheduler: ...

    @property
    def toolkit(self) -> Toolkit: ...

    @property
    def tally(self) -> Tally: ...

    def workers(self) -> int: ...

    def status(self, asking: object = None) -> dict[str, Any]: ...

    def stop(self) -> None: ...

    async def warm_up(self) -> None: ...


#: Jobs handed to the scheduler at a time, longest first, each batch once the client's
#: answers waiting to be written are under the session's bounds (Poster.room) and its
#: jobs in the scheduler under :func:`in_flight_limit`.
FEED = 16
#: The fewest jobs a client may have in the scheduler at once (more on a server with
#: more compile slots: :func:`in_flight_limit`).
MIN_IN_FLIGHT = 64


#: A ``results`` message carries outcomes up to about this many bytes of logs and
#: binaries (one larger outcome goes alone, in as many frames as it needs).
PACK_BYTES = 2**20

#: What a session's writer writes for a call: messages, each with its blobs and how many
#: answers and bytes of the session's bounds it frees.
Drained = list[tuple[Any, list[bytes], int, int]]


class Poster(Protocol):
    """Where a client's answers go: posted from plain code, written in order."""

    def post(self, message: Any, blobs: Sequence[bytes] = ()) -> None: ...

    def post_later(
        self, drain: Callable[[], Drained], answers: int, size: int, *, now: bool = False
    ) -> None:
        """Write what ``drain()`` gives when the writer comes to it (what is ready
        then goes out together); ``answers`` and ``size`` count toward the bounds now.
        ``now``: nothing more will be gathered (the call is complete), so if nothing
        waits to be written before it, it is written at once."""
        ...

    def hold(self, answers: int, size: int) -> None:
        """``answers`` more (``size`` bytes) wait in a drain already posted."""
        ...

    async def room(self) -> None:
        """Until the client's answers waiting to be written are under the bounds."""
        ...


#: Jobs of one client the server holds before handing them to the scheduler: past this
#: many (or :data:`MAX_WAITING_BYTES` of sources) it reads no more of the client's
#: requests until some are handed on. A client that sends jobs far faster than they
#: compile (and reads its answers) is held to this, not to all it sent.
MAX_WAITING_JOBS = 1024
MAX_WAITING_BYTES = 256 * 2**20


def _size(request: CompileRequest) -> int:
    return len(request.prepared.source) + len(request.prepared.fallback_source or "")


class _ClientCall:
    """One call of a client: its jobs as they arrive, and what goes back to it, gathered
    until the session's writer takes it (:meth:`drain`)."""

    def __init__(
        self, host: Host, out: Poster, number: int, want: bool, ended: Callable[[int], None]
    ) -> None:
        self.host = host
        self.out = out
        self.id = number
        self.want = want
        self.ended = ended  # told how many of this call's jobs left the scheduler
        self.fed = 0  # jobs handed to the scheduler and not ended
        self.scope = anyio.CancelScope()
        self.send, self.receive = anyio.create_memory_object_stream[Sequence[CompileRequest]](
            math.inf
        )
        self.waiting = 0  # jobs received, not handed to the scheduler
        self.waiting_bytes = 0
        self.received = 0  # jobs received, and outcomes made
        self.answered = 0
        self.last = False  # the client said end: no more jobs
        self.over = False  # end said back: nothing more goes out
        self.run_over = False  # the scheduler is done with the call
        # Gathered and not yet written (a drain is posted while there is some).
        self._started: list[int] = []
        self._outcomes: list[tuple[OutcomeSpec, list[bytes], int]] = []
        self._posted = False
        #: What the scheduler tells (started, finished), counted in the server's tally.
        self.events = Counting(host.tally, self)

    def take(self, chunk: list[CompileRequest], last: bool) -> None:
        self.received += len(chunk)
        self.events.expect(chunk)
        self.last = last
        if chunk:
            self.send.send_nowait(chunk)
        if last:
            self.send.close()

    def started(self, index: int) -> None:
        self._started.append(index)
        self._gathered(1, 0)

    def finished(self, index: int, outcome: Outcome) -> None:
        spec, blobs = outcome_form(index, outcome, self.want)
        size = 256 + sum(len(b) for b in blobs)
        self._outcomes.append((spec, blobs, size))
        self.answered += 1
        self._gathered(1, size)
        self.fed -= 1
        self.ended(1)

    def finish_run(self) -> None:
        """The scheduler returned: every job has had its outcome; say end (if the last
        outcome has not said it already)."""
        self.run_over = True
        self._gathered(0, 0)

    @property
    def complete(self) -> bool:
        """Every job the client sent has had its outcome."""
        return self.run_over or (self.last and self.answered == self.received)

    def _gathered(self, answers: int, size: int) -> None:
        if self._posted:
            self.out.hold(answers, size)
        else:
            self._posted = True
            # A call that is complete goes out now if the writer is idle (a one-job
            # cache hit: the writer's turn of the event loop is a good part of it).
            self.out.post_later(self.drain, answers, size, now=self.complete)

    def drain(self) -> Drained:
        """What is gathered, as ``results`` messages of about PACK_BYTES each; the last
        says ``end`` once every job the client sent has had its outcome."""
        self._posted = False
        started, self._started = self._started, []
        outcomes, self._outcomes = self._outcomes, []
        if self.over:
            return []
        messages: Drained = []
        while True:
            specs: list[OutcomeSpec] = []
            blobs: list[bytes] = []
            size = 0
            while outcomes and (not specs or size + outcomes[0][2] <= PACK_BYTES):
                spec, its_blobs, its_size = outcomes.pop(0)
                specs.append(spec)
                blobs.extend(its_blobs)
                size += its_size
            end = self.complete and not outcomes
            if specs or started or end:
                answers = len(specs) + len(started)
                messages.append((Results(self.id, started, specs, end), blobs, answers, size))
                started = []
            if end:
                self.over = True
            if not outcomes:
                return messages


class Requests:
    """One client's requests: those open, and what each message does."""

    def __init__(self, host: Host, out: Poster, task_group: anyio.abc.TaskGroup) -> None:
        self.host = host
        self.out = out
        self.task_group = task_group
        self.calls: dict[int, _ClientCall] = {}
        #: This client's jobs in the scheduler (handed to it, not ended).
        self.in_flight = 0
        self._left = anyio.Event()
        #: This client's jobs received and not handed to the scheduler yet (and the most
        #: there ever were: the status says it), and their sources' size.
        self.waiting = 0
        self.waiting_peak = 0
        self.waiting_bytes = 0
        self._handed = anyio.Event()

    async def room(self) -> None:
        """Until the jobs waiting to be handed to the scheduler are under the bounds
        (the session reads no request meanwhile)."""
        while self.waiting >= MAX_WAITING_JOBS or self.waiting_bytes >= MAX_WAITING_BYTES:
            if self._handed.is_set():
                self._handed = anyio.Event()
            await self._handed.wait()

    def _waiting(self, call: _ClientCall, count: int, size: int) -> None:
        """``count`` jobs of ``call`` (``size`` bytes of sources) more waiting (fewer,
        when negative)."""
        call.waiting += count
        call.waiting_bytes += size
        self.waiting += count
        self.waiting_bytes += size
        self.waiting_peak = max(self.waiting_peak, self.waiting)
        if count < 0:
            self._handed.set()

    def take(self, message: Message) -> None:
        """Act on one message; a request refused is answered with an error naming it."""
        try:
            self._dispatch(message)
        except (WireError, ValueError) as exc:
            # A message of the wrong shape, or a job this server will not run: that
            # request is refused, the connection goes on.
            number = request_id(message)
            self.out.post(Error(number, f"refused: {exc}", False))
            call = self.calls.get(number) if number is not None else None
            if call is not None:
                call.scope.cancel()

    def cancel_all(self) -> None:
        """The client left: what it has running is dropped."""
        for call in list(self.calls.values()):
            call.scope.cancel()

    def _dispatch(self, message: Message) -> None:
        request = parse(message)
        if isinstance(request, Compile):
            if request.id in self.calls:
                raise WireError(f"request {request.id} is already open")
            call = _ClientCall(self.host, self.out, request.id, request.want, self._ended)
            self.calls[request.id] = call
            try:
                self._take_jobs(call, request.jobs, request.end, message.blobs)
            except BaseException:
                del self.calls[request.id]  # refused whole: it never runs
                raise
            self.task_group.start_soon(self._run, call)
        elif isinstance(request, Jobs):
            call = self._open(request.id)
            if call.last:
                raise WireError(f"request {request.id} has ended; no more jobs")
            self._take_jobs(call, request.jobs, request.end, message.blobs)
        elif isinstance(request, Cancel):
            cancelled = self.calls.get(request.id)
            if cancelled is not None:
                cancelled.scope.cancel()
        elif isinstance(request, WarmUp):
            self.task_group.start_soon(self._warm_up, request.id)
        elif isinstance(request, MakePch):
            (checked,) = self._jobs([request.job], message.blobs)
            self.task_group.start_soon(self._make_pch, request.id, checked.prepared)
        elif isinstance(request, Status):
            self.out.post(StatusReply(request.id, self.host.status(asking=self.out)))
        elif isinstance(request, Stop):
            self.out.post(Stopping(request.id))
            self.host.stop()
        else:
            raise WireError(f"a {message.type!r} message is not a request")

    def _take_jobs(
        self, call: _ClientCall, specs: list[JobSpec], last: bool, blobs: list[bytes]
    ) -> None:
        chunk = self._jobs(specs, blobs)
        try:
            call.take(chunk, last)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise WireError(f"request {call.id} has ended; no more jobs") from None
        self._waiting(call, len(chunk), sum(_size(r) for r in chunk))

    def _open(self, number: int) -> _ClientCall:
        call = self.calls.get(number)
        if call is None:
            raise WireError(f"request {number} is not open")
        return call

    def _jobs(self, specs: list[JobSpec], blobs: list[bytes]) -> list[CompileRequest]:
        """The requests a message carries, each checked (ValueError: refused)."""
        needed = sum(2 if spec.fallback else 1 for spec in specs)
        if needed != len(blobs):
            raise WireError(f"{len(specs)} jobs with {len(blobs)} sources")
        chunk: list[CompileRequest] = []
        at = 0
        for spec in specs:
            count = 2 if spec.fallback else 1
            request = prepared_of(spec, blobs[at : at + count])
            at += count
            check_compile(request.prepared, self.host.scheduler.backends, self.host.toolkit)
            chunk.append(request)
        return chunk

    async def _run(self, call: _ClientCall) -> None:
        try:
            with call.scope:
                await self.host.scheduler.run(self._fed(call), call.events, want=call.want)
                call.finish_run()
        finally:
            call.send.close()
            call.receive.close()
            self.calls.pop(call.id, None)
            self._ended(call.fed)  # cancelled: what it had in the scheduler is dropped
            call.fed = 0
            self._waiting(call, -call.waiting, -call.waiting_bytes)  # and what waited

    def _ended(self, count: int) -> None:
        if count:
            self.in_flight -= count
            self._left.set()

    async def _fed(self, call: _ClientCall) -> AsyncIterator[Sequence[CompileRequest]]:
        """A call's jobs for the scheduler, FEED at a time, longest first among those
        that have arrived, each batch once the client has room for its answers and
        fewer than :func:`in_flight_limit` jobs in the scheduler: a client that reads
        nothing holds the session's bound and these, however many jobs it sent."""
        arrived: list[tuple[float, int, CompileRequest]] = []
        more = True
        limit = in_flight_limit(self.host.scheduler.slots())
        while more or arrived:
            while more:  # take what has arrived, without waiting (or a turn of the loop)
                try:
                    try:
                        chunk = call.receive.receive_nowait()
                    except anyio.WouldBlock:
                        if arrived:
                            break
                        chunk = await call.receive.receive()
                except anyio.EndOfStream:
                    more = False
                    break
                for request in chunk:
                    heapq.heappush(arrived, (-request.estimate, request.index, request))
            if not arrived:
                continue
            await self.out.room()
            while self.in_flight >= limit:
                if self._left.is_set():
                    self._left = anyio.Event()
                await self._left.wait()
            batch = [heapq.heappop(arrived)[2] for _ in range(min(FEED, len(arrived)))]
            self._waiting(call, -len(batch), -sum(_size(r) for r in batch))
            call.fed += len(batch)
            self.in_flight += len(batch)
            yield batch

    async def _warm_up(self, number: int) -> None:
        await self.host.warm_up()
        self.out.post(WarmedUp(number))

    async def _make_pch(self, number: int, prepared: PreparedCompile) -> None:
        made = await self.host.scheduler.make_pch(prepared)
        self.out.post(PchMade(number, made))


def in_flight_limit(slots: Mapping[str, int]) -> int:
    """How many jobs one client may have in the scheduler at once: enough to keep every
    compile slot busy twice over, and at least MIN_IN_FLIGHT."""
    return max(MIN_IN_FLIGHT, 2 * sum(slots.values()))


def check_compile(prepared: PreparedCompile, backends: Mapping[str, Any], toolkit: Toolkit) -> None:
    """Raise ValueError (naming what is wrong) unless this server may run ``prepared``:
    one of its ``backends``, an architecture its compiler takes, rendered for its
    ``toolkit``, a source no larger than any engine takes."""
    what = f"job {prepared.filename!r}"
    if prepared.backend not in backends:
        raise ValueError(f"{what}: no backend {prepared.backend!r} here")
    cls = backend_class(prepared.backend)
    # The backend's own rules: its outputs, its file names, its compiler's path.
    cls.check_prepared(prepared, toolkit)
    parse_arch(prepared.arch)
    known = cls.archs(toolkit)
    if not arch_supported(known, prepared.arch):
        listed = ", ".join(f"sm_{n}" for n in sorted(known))
        raise ValueError(
            f"{what}: {prepared.backend} here does not take {prepared.arch} (it supports {listed})"
        )
    for source in (prepared.source, prepared.fallback_source or ""):
        # What CompileJob refuses in every engine, refused here too: the wire's limit
        # is in bytes, and a client of its own could send more characters.
        if len(source) > MAX_SOURCE_CHARS:
            raise ValueError(f"{what}: a source over {MAX_SOURCE_CHARS} characters ({len(source)})")
    if any("\x00" in option for option in prepared.options):
        raise ValueError(f"{what}: an option holds a NUL byte")
    if prepared.timeout is not None and prepared.timeout <= 0:
        raise ValueError(f"{what}: timeout {prepared.timeout}")
    if prepared.keep_dir is not None and not Path(prepared.keep_dir).is_absolute():
        raise ValueError(f"{what}: keep_dir {prepared.keep_dir!r} is not absolute")
    if (prepared.base_dir is None) != (prepared.cwd is None) or any(
        folder is not None and not Path(folder).is_absolute()
        for folder in (prepared.base_dir, prepared.cwd)
    ):
        raise ValueError(f"{what}: base_dir and cwd must be two absolute folders, or neither")
