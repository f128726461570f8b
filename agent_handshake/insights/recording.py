"""One record per agent request, written in bulk off the request path.

A front door opens a :class:`Record` when a request arrives (:func:`begin`), the concierge notes what it did
while it works (:func:`note`: the capability, the outcome, tokens, the answer cache, the cited documents, the
question), and the front door settles who asked and the status and finishes it (:func:`finish`; a streamed
response when its stream ends, :func:`streamed`). The open record is held in a :class:`~contextvars.ContextVar`,
so the concierge needs no handle on it, and :func:`note` does nothing where no request is being recorded (a
Celery task, the shell).

A finished record is appended to a process-local buffer under a lock, and that is all a request pays. A daemon
thread, started with the first record (and again in a forked child: gunicorn's workers), writes the buffer with
one ``bulk_create`` every ``INSIGHTS_FLUSH_SECONDS`` on a database connection of its own, closed after each
write, and once more when the interpreter exits (after the write under way, if any: at most
``EXIT_WAIT_SECONDS``). Whatever turns a record into a row (the question's redaction, the sender's network prefix)
is done there too. Recording never raises into a request: a buffer over
``INSIGHTS_BUFFER_MAX`` drops the newest records (counted in :func:`dropped`, and logged); a write that fails
keeps its records for the next one (a record that can never be stored is dropped and logged). A process that
dies loses the records not yet written: at most ``INSIGHTS_FLUSH_SECONDS`` of its requests.

``INSIGHTS_FLUSH_SECONDS = 0`` starts no thread and writes nothing at exit: only :func:`flush` writes, on the
caller's connection (the test suite's mode, whose tests run in transactions that a thread's commits would
escape). For the same reason a process whose settings are changed while it runs (Django's ``override_settings``
and ``setting_changed``: tests) stops its writer and starts none again, whatever the interval then says: an
override of ``AGENT_HANDSHAKE`` would otherwise bring back the default interval in the middle of a test.
"""

from __future__ import annotations

import atexit
import contextvars
import datetime
import ipaddress
import logging
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.signals import setting_changed
from django.db import DatabaseError, DataError, IntegrityError, connections, router, transaction
from django.dispatch import receiver
from django.utils import timezone

from ..conf import app_settings
from ..models.insights import AgentKind, AgentRequest, Outcome
from .redaction import redact

__all__ = [
    "AgentKind",
    "Outcome",
    "Record",
    "begin",
    "current",
    "dropped",
    "finish",
    "flush",
    "network_prefix",
    "note",
    "outcome_of_status",
    "pending",
    "streamed",
]

logger = logging.getLogger(__name__)

#: The longest question stored (after redaction), in characters.
MAX_QUESTION_CHARS = 1000
#: The anonymous sender's network as stored: an IPv4 /24 or an IPv6 /48 (the address itself never is).
IPV4_PREFIX, IPV6_PREFIX = 24, 48
#: How long a process that exits waits for a write its writer thread has under way (seconds).
EXIT_WAIT_SECONDS = 10

_AGENT_CHARS = AgentRequest._meta.get_field("agent").max_length
_CAPABILITY_CHARS = AgentRequest._meta.get_field("capability").max_length


@dataclass(slots=True, eq=False)
class Record:
    """What is known of one agent request while it is served; :func:`rows` turns it into an ``AgentRequest``."""

    protocol: str
    capability: str = ""
    at: datetime.datetime = field(default_factory=timezone.now)
    started: float = field(default_factory=time.perf_counter)
    #: What the concierge noted ("" until it does); :func:`outcome_of` weighs it against the HTTP status.
    noted: str = ""
    tokens: int = 0
    cached: bool = False
    weak: bool = False
    sources: list[int] = field(default_factory=list)
    question: str = ""
    requesting_agent: str = ""
    status: int = 0
    latency_ms: int = 0
    agent_kind: str = AgentKind.ANONYMOUS
    #: The DID or the API key's client; for an anonymous sender "" (its name and network are added when written).
    agent: str = ""
    #: An anonymous sender's address, kept in memory only until the record is written (its prefix is stored).
    address: str | None = None
    finished: bool = False

    def settle(self, status: int, *, agent_kind: str, agent: str = "", address: str | None = None) -> None:
        """Who asked, and the response's status."""
        self.status, self.agent_kind, self.agent, self.address = status, agent_kind, agent, address

    @property
    def outcome(self) -> str:
        return outcome_of(self.status, self.noted)


_current: contextvars.ContextVar[Record | None] = contextvars.ContextVar("agent_handshake_insights", default=None)


def outcome_of_status(status: int) -> str:
    """The outcome an error status means by itself."""
    if status == 429:
        return Outcome.RATE_LIMITED
    if status in (401, 403):
        return Outcome.REFUSED
    return Outcome.ERROR if status >= 400 else Outcome.SUCCESS


def outcome_of(status: int, noted: str) -> str:
    """The outcome of a request: a 429, 401, 403 or 5xx says it whatever was noted; another 4xx is an error
    unless the concierge noted a refusal (a capability's own, such as an invalid input or a taken slot); a success
    status is what the concierge noted (an error noted under a 200 is one a protocol reports in its body)."""
    if status == 429 or status in (401, 403) or status >= 500:
        return outcome_of_status(status)
    if status >= 400:
        return noted if noted in (Outcome.REFUSED, Outcome.RATE_LIMITED) else Outcome.ERROR
    return noted or Outcome.SUCCESS


def begin(protocol: str, capability: str = "") -> Record | None:
    """Open the record of the request being served (None, and nothing recorded, when insights are off)."""
    if not app_settings.INSIGHTS_ENABLED:
        return None
    record = Record(protocol, capability[:_CAPABILITY_CHARS])
    _current.set(record)
    return record


def current() -> Record | None:
    """The record open in this context, if any."""
    record = _current.get()
    return None if record is None or record.finished else record


def note(
    *,
    capability: str | None = None,
    outcome: str | None = None,
    tokens: int = 0,
    cached: bool | None = None,
    weak: bool | None = None,
    sources: Sequence[int] | None = None,
    question: str | None = None,
    requesting_agent: str | None = None,
) -> None:
    """What the concierge did for the request being recorded; nothing when none is (tokens add up, the rest is
    the latest said). The question is kept only with ``INSIGHTS_RECORD_QUESTIONS``."""
    record = current()
    if record is None:
        return
    if capability:
        record.capability = capability[:_CAPABILITY_CHARS]
    if outcome:
        record.noted = outcome
    record.tokens += max(0, int(tokens or 0))
    if cached is not None:
        record.cached = cached
    if weak is not None:
        record.weak = weak
    if sources is not None:
        record.sources = list(sources)
    if question is not None and app_settings.INSIGHTS_RECORD_QUESTIONS:
        record.question = question
    if requesting_agent is not None:
        record.requesting_agent = requesting_agent


def finish(record: Record) -> None:
    """Close ``record`` and queue it for writing (once; never raises)."""
    if record.finished:
        return
    record.finished = True
    record.latency_ms = max(0, round((time.perf_counter() - record.started) * 1000))
    if _current.get() is record:
        _current.set(None)
    try:
        _buffer.append(record)
    except Exception:  # recording never breaks an answer
        logger.exception("An agent request could not be recorded")


def streamed(record: Record, content: Iterable[bytes] | AsyncIterator[bytes]) -> Iterator[bytes] | AsyncIterator[bytes]:
    """``content`` (a streamed response's), recorded as the request's: what the concierge notes while the stream is
    produced goes into ``record``, which is finished when the stream ends or is closed."""
    if hasattr(content, "__aiter__"):
        return _streamed_async(record, content)  # type: ignore[arg-type]
    return _streamed(record, content)  # type: ignore[arg-type]


class _Streamed:
    """A synchronous stream that finishes its record when it ends or is closed, even unstarted (the server
    closes a response whose client went away before its first chunk; a generator never started runs no
    ``finally``)."""

    def __init__(self, record: Record, content: Iterable[bytes]) -> None:
        self.record, self.content = record, content

    def __iter__(self) -> Iterator[bytes]:
        _current.set(self.record)
        try:
            yield from self.content
        finally:
            finish(self.record)

    def close(self) -> None:
        try:
            close = getattr(self.content, "close", None)
            if close is not None:
                close()
        finally:
            finish(self.record)


def _streamed(record: Record, content: Iterable[bytes]) -> Iterator[bytes]:
    return _Streamed(record, content)  # type: ignore[return-value]


def release(record: Record) -> None:
    """This context no longer serves ``record`` (a stream carries it on): later notes here do not reach it."""
    if _current.get() is record:
        _current.set(None)


async def _streamed_async(record: Record, content: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    _current.set(record)  # copied into the thread that advances a synchronous stream (asgiref's sync_to_async)
    try:
        async for chunk in content:
            yield chunk
    finally:
        finish(record)


def network_prefix(address: str | None) -> str:
    """The network an address belongs to, as stored: its IPv4 /24 or IPv6 /48 ("unknown" without one)."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "unknown"
    prefix = IPV4_PREFIX if ip.version == 4 else IPV6_PREFIX
    return str(ipaddress.ip_network((ip, prefix), strict=False))


def agent_of(record: Record) -> str:
    """Who asked, as stored: the DID or client name; an anonymous sender's declared name and network prefix."""
    if record.agent_kind != AgentKind.ANONYMOUS:
        return record.agent[:_AGENT_CHARS]
    network = network_prefix(record.address)
    # A declared name is the sender's words: redacted like a question (an email as a "name" is not kept).
    name = redact(" ".join(record.requesting_agent.split()))[: _AGENT_CHARS - len(network) - 3]
    return f"{name} @ {network}" if name else network


def row(record: Record) -> AgentRequest:
    question = redact(record.question)[:MAX_QUESTION_CHARS] if record.question else ""
    return AgentRequest(
        at=record.at,
        protocol=record.protocol,
        capability=record.capability,
        outcome=record.outcome,
        status=record.status,
        latency_ms=record.latency_ms,
        tokens=record.tokens,
        cached=record.cached,
        weak=record.weak,
        sources=record.sources,
        agent_kind=record.agent_kind,
        agent=agent_of(record),
        question=question,
    )


# --- the buffer and its writer -----------------------------------------------------------------------------------


class Buffer:
    """The finished records of this process waiting to be written, and the thread that writes them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: deque[Record] = deque()
        self.dropped = 0
        self.pid = os.getpid()
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.exit_hook = False
        #: False once the settings were changed at run time (tests): no writer thread, nothing written at exit.
        self.writer_allowed = True

    def append(self, record: Record) -> None:
        with self.lock:
            if os.getpid() != self.pid:  # a forked child: the parent's records are the parent's to write
                self.records.clear()
                self.pid, self.thread = os.getpid(), None
            cap = max(0, int(app_settings.INSIGHTS_BUFFER_MAX))
            if len(self.records) >= cap:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    logger.warning(
                        "Agent traffic insights: %d record(s) dropped, the buffer holds its cap of %d (the database "
                        "is not keeping up, or is unreachable)",
                        self.dropped,
                        cap,
                    )
                return
            self.records.append(record)
            interval = float(app_settings.INSIGHTS_FLUSH_SECONDS)
            if interval > 0 and self.thread is None and self.writer_allowed:
                self.start()
            if len(self.records) * 2 >= cap:
                self.wake.set()  # half full: write now rather than at the next tick

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="agent-handshake-insights", daemon=True)
        self.thread.start()
        if not self.exit_hook:
            atexit.register(self.at_exit)
            self.exit_hook = True

    def take(self) -> list[Record]:
        with self.lock:
            taken = list(self.records)
            self.records.clear()
        return taken

    def give_back(self, records: list[Record]) -> None:
        """Records a write could not store, back at the head of the queue (as many as the cap leaves room for)."""
        with self.lock:
            room = max(0, int(app_settings.INSIGHTS_BUFFER_MAX) - len(self.records))
            lost = len(records) - room
            if lost > 0:
                self.dropped += lost
                logger.warning("Agent traffic insights: %d record(s) dropped, the buffer is full", lost)
                records = records[lost:]
            self.records.extendleft(reversed(records))

    def run(self) -> None:
        thread = threading.current_thread()
        while True:
            self.wake.wait(max(0.05, float(app_settings.INSIGHTS_FLUSH_SECONDS)))
            self.wake.clear()
            if self.thread is not thread or os.getpid() != self.pid:
                return  # stopped (settings changed at run time), or a forked child's copy
            if self.records:
                self.write_out()

    def write_out(self) -> None:
        try:
            flush()
        except Exception:  # flush() logs what it could not write; nothing may kill the writer
            logger.exception("Agent traffic insights: writing the records failed")
        finally:
            connections.close_all()  # this thread's own connections: none is kept between writes

    def at_exit(self) -> None:
        interval = float(app_settings.INSIGHTS_FLUSH_SECONDS)
        if not (self.writer_allowed and interval > 0 and os.getpid() == self.pid):
            return
        # The writer may be in the middle of a write: its records are out of the buffer, and the interpreter stops
        # daemon threads right after the exit hooks, so the process waits for that write (a while) before its own.
        writer = self.thread
        self.stop_writer()
        if writer is not None and writer is not threading.current_thread():
            writer.join(EXIT_WAIT_SECONDS)
        if self.records:
            self.write_out()

    def stop_writer(self) -> None:
        with self.lock:
            self.writer_allowed, self.thread = False, None  # the running thread sees it is no longer the writer
        self.wake.set()

    def after_fork(self) -> None:
        self.lock = threading.Lock()  # a lock held by another thread at the fork would stay held in the child
        self.records = deque()
        self.pid, self.thread, self.wake = os.getpid(), None, threading.Event()


_buffer = Buffer()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_buffer.after_fork)


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "AGENT_HANDSHAKE":  # another setting changed at run time leaves the writer alone
        _buffer.stop_writer()


def flush() -> int:
    """Write the waiting records now, on this thread's connection (one ``bulk_create``); how many were stored.

    A record that cannot be stored (its data refused by the database) is dropped and logged; when the database
    cannot be reached the records wait for the next write."""
    records = _buffer.take()
    if not records:
        return 0
    rows, made = [], []
    for record in records:
        try:
            rows.append(row(record))
            made.append(record)
        except Exception:  # one record that cannot be made a row is dropped and logged, never the batch
            logger.exception("Agent traffic insights: a record could not be made into a row and was dropped")
    records = made
    if not rows:
        return 0
    try:
        with transaction.atomic(using=router.db_for_write(AgentRequest)):  # a savepoint inside a transaction
            AgentRequest.objects.bulk_create(rows)
        return len(rows)
    except (DataError, IntegrityError):
        return _one_by_one(records, rows)
    except DatabaseError:
        logger.warning("Agent traffic insights: %d record(s) not written yet", len(records), exc_info=True)
        _buffer.give_back(records)
        return 0


def _one_by_one(records: list[Record], rows: list[AgentRequest]) -> int:
    """The rows of a batch the database refused, one at a time: those it refuses again are dropped."""
    stored = 0
    for index, agent_request in enumerate(rows):
        try:
            with transaction.atomic(using=router.db_for_write(AgentRequest)):
                agent_request.save(force_insert=True)
            stored += 1
        except (DataError, IntegrityError):
            logger.warning("Agent traffic insights: a record could not be stored and was dropped", exc_info=True)
            with _buffer.lock:
                _buffer.dropped += 1
        except DatabaseError:
            logger.warning("Agent traffic insights: records not written yet", exc_info=True)
            _buffer.give_back(records[index:])
            break
    return stored


def pending() -> int:
    """How many records wait to be written in this process."""
    return len(_buffer.records)


def dropped() -> int:
    """How many records this process dropped (a full buffer, or data the database refused)."""
    return _buffer.dropped


def discard() -> None:
    """Forget the waiting records and the drop count (tests)."""
    with _buffer.lock:
        _buffer.records.clear()
        _buffer.dropped = 0


def who_asked(credentials: Any) -> tuple[str, str]:
    """The agent kind and name for a request's credentials (``identity.auth.Credentials``; None: anonymous)."""
    agent = getattr(credentials, "agent", None)
    if agent is not None:
        return AgentKind.VERIFIED, agent.did
    key = getattr(credentials, "key", None)
    if key is not None:
        return AgentKind.KEY, key.client.name
    return AgentKind.ANONYMOUS, ""
