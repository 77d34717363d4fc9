"""The connection to a NATS server with JetStream, and the streams rolecall uses.

* ``ROLECALL_EVENTS`` (file storage): every event of every session run with ``--nats``,
  on ``rolecall.<session_id>.<topic>.<type>``; the durable log.
* ``ROLECALL_JOBS`` (work queue): one message per batch run on ``rolecall_jobs.<batch>``.
* ``ROLECALL_RESULTS``: per batch, its plan and one result row per run that ended.

Unreachable at start is a :class:`~rolecall.errors.RuntimeFailure` naming the URL (exit 1),
within a few seconds; a connection lost later is re-established by nats-py's reconnect.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import anyio

from rolecall.errors import RuntimeFailure, UsageError
from rolecall.log import get_logger

T = TypeVar("T")

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext

log = get_logger(__name__)

EVENTS_STREAM = "ROLECALL_EVENTS"
JOBS_STREAM = "ROLECALL_JOBS"
EVENT_SUBJECTS = "rolecall.*.*.*"
# a worker's lease on a session (rolecall.<session_id>.lease): its claim when it takes
# the session, then one renewal per batch it publishes (rolecall.nats.bus.Publisher);
# three tokens, so no reader of events (rolecall.*.*.*) meets one
LEASE_SUBJECTS = "rolecall.*.lease"
JOB_SUBJECTS = "rolecall_jobs.*"
RESULTS_STREAM = "ROLECALL_RESULTS"  # per batch: its plan and one result row per run
RESULT_SUBJECTS = "rolecall_results.>"
CONNECT_TIMEOUT_S = 1.0  # one attempt
CONNECT_DEADLINE_S = 2.0  # every attempt of the first connection
STREAMS_DEADLINE_S = 10.0  # a server restarting as we connect: how long its streams are awaited
DRAIN_S = 2.0  # closing: what was sent is flushed, what was received handled
ENV_URL = "ROLECALL_NATS_URL"

# headers of an event message (the payload is the event's JSON, exactly as --json prints it)
H_MSG_ID = "Nats-Msg-Id"  # <session_id>:<seq>: JetStream drops a re-sent duplicate
H_WORLD = "Rolecall-World"  # on a session's first event: what a resume needs to start
H_CHECKPOINT = "Rolecall-Checkpoint"  # after a commit: what a resume needs to go on
H_BATCH = "Rolecall-Batch"  # the batch and run a session belongs to, when it does
H_RUN = "Rolecall-Run"
H_LEASE = "Rolecall-Lease"  # on a lease message: the epoch (the process's run) holding it


def subject_token(value: str, what: str) -> str:
    """``value`` as one token of a NATS subject; UsageError when it holds a ``.``.

    A safe id may (``run.v2``), but a subject would split it in two tokens: no stream's
    subjects would take the message, and a publish would wait for a stream forever.
    """
    if "." in value:
        raise UsageError(
            f"{what} {value!r} cannot be used with --nats: a NATS subject would split it at "
            "its '.' (use letters, digits, '_' and '-')"
        )
    return value


def event_subject(session_id: str, topic: str, kind: str) -> str:
    return f"rolecall.{subject_token(session_id, 'session id')}.{topic}.{kind}"


def session_filter(session_id: str | None) -> str:
    if not session_id:
        return EVENT_SUBJECTS
    return f"rolecall.{subject_token(session_id, 'session id')}.*.*"


def log_filter(session_id: str | None) -> str:
    """Every message of a session (or of all): its events and its leases."""
    if not session_id:
        return "rolecall.>"
    return f"rolecall.{subject_token(session_id, 'session id')}.>"


def lease_subject(session_id: str) -> str:
    return f"rolecall.{subject_token(session_id, 'session id')}.lease"


def nats_url(explicit: str | None) -> str | None:
    """``--nats URL``, else ``ROLECALL_NATS_URL``, else None (in-process).

    A usage error when it is not a URL nats-py can connect to (checked here, so that no
    command meets nats-py's own ``invalid connect url option`` at connection time). A
    comma-separated list names several servers of one cluster, as the ``nats`` tools
    take it: :func:`servers` splits it.
    """
    url = explicit or os.environ.get(ENV_URL) or None
    if url is not None:
        problems = [p for s in url.split(",") if (p := _url_problem(s.strip())) is not None]
        websockets = {s.strip().startswith(("ws://", "wss://")) for s in url.split(",")}
        if not problems and len(websockets) > 1:
            problems.append("ws:// and wss:// servers cannot be mixed with nats:// or tls:// ones")
        if problems:
            flag = "--nats" if explicit else ENV_URL
            raise UsageError(
                f"{flag} expects a URL like nats://127.0.0.1:4222 (several servers "
                f"comma-separated), got {url!r}: {problems[0]}"
            )
        url = ",".join(servers(url))  # no blanks: a hint naming it works pasted in a shell
    return url


_SCHEMES = ("nats", "tls", "ws", "wss")


def _url_problem(server: str) -> str | None:
    """What is wrong with one server's URL, or None."""
    from urllib.parse import urlsplit

    if not server:
        return "an empty server in the list"
    if "://" not in server:
        return f"{server!r} has no scheme (nats://)"
    try:
        parts = urlsplit(server)
        port = parts.port
    except ValueError:
        # a port that is not a number, or out of 0-65535 (urllib's own message varies)
        netloc = server.split("://", 1)[1].split("/", 1)[0]
        given = netloc.rsplit("@", 1)[-1].rpartition(":")[2]
        return f"the port {given!r} is not a number from 1 to 65535"
    if parts.scheme not in _SCHEMES:
        return f"the scheme {parts.scheme + '://'!r} is not one of " + ", ".join(
            f"{s}://" for s in _SCHEMES
        )
    if not parts.hostname:
        return f"{server!r} names no host"
    if port == 0:
        return "the port 0 is not a number from 1 to 65535"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return f"{server!r} has more than a host and port"
    return None


def servers(url: str) -> list[str]:
    """The servers of a ``--nats`` value checked by :func:`nats_url` (one, or several
    comma-separated)."""
    return [s.strip() for s in url.split(",")]


def required_nats_url(explicit: str | None, command: str) -> str:
    """``--nats URL`` (or ``ROLECALL_NATS_URL``) for a command that only works on NATS."""
    url = nats_url(explicit)
    if url is None:
        raise UsageError(f"{command} needs --nats URL (or ROLECALL_NATS_URL)")
    return url


@dataclass
class Link:
    url: str
    nc: Client
    js: JetStreamContext
    # called once the connection is back after it was lost (the publisher re-sends what
    # the lost connection may have dropped, at once rather than after its ack timeout)
    on_reconnect: list[Callable[[], None]] = field(default_factory=list)


async def _ensure_streams(js: JetStreamContext) -> None:
    from nats.js.api import RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import BadRequestError, NotFoundError

    wanted = [
        StreamConfig(
            name=EVENTS_STREAM,
            subjects=[EVENT_SUBJECTS, LEASE_SUBJECTS],
            storage=StorageType.FILE,
            duplicate_window=120.0,
        ),
        StreamConfig(
            name=JOBS_STREAM,
            subjects=[JOB_SUBJECTS],
            storage=StorageType.FILE,
            retention=RetentionPolicy.WORK_QUEUE,
            duplicate_window=120.0,
        ),
        StreamConfig(
            name=RESULTS_STREAM,
            subjects=[RESULT_SUBJECTS],
            storage=StorageType.FILE,
            duplicate_window=120.0,
        ),
    ]
    for config in wanted:
        assert config.name is not None
        try:
            info = await js.stream_info(config.name)
            missing = [s for s in config.subjects or [] if s not in (info.config.subjects or [])]
            if missing:  # made by an older rolecall: the leases' subjects are added
                subjects = [*(info.config.subjects or []), *missing]
                await js.update_stream(info.config.evolve(subjects=subjects))
        except NotFoundError:
            try:
                await js.add_stream(config)
            except BadRequestError as exc:  # created meanwhile by another process
                log.info("stream_exists", stream=config.name, error=str(exc))


async def _streams_ready(js: JetStreamContext, url: str) -> None:
    """The streams in place; a server that is restarting (requests time out while it
    comes back) is waited for up to :data:`STREAMS_DEADLINE_S`."""
    from nats.errors import TimeoutError as NatsTimeout

    deadline = anyio.current_time() + STREAMS_DEADLINE_S
    while True:
        try:
            await _ensure_streams(js)
            return
        except NatsTimeout as exc:
            if anyio.current_time() >= deadline:
                problem: Exception = exc
                break
            log.info("nats_streams_retry", url=url, error=str(exc) or "timeout")
            await anyio.sleep(0.2)
        except Exception as exc:
            problem = exc
            break
    raise RuntimeFailure(
        f"the NATS server at {url} has no usable JetStream ({problem}); start it with "
        "`nats-server -js`"
    ) from None


async def answered(url: str, what: str, call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` (a JetStream API request), again while it times out, for at most
    :data:`STREAMS_DEADLINE_S`: a server restarting answers nothing until its JetStream
    is back, and the command should wait for it rather than fail with a traceback."""
    from nats.errors import TimeoutError as NatsTimeout

    deadline = anyio.current_time() + STREAMS_DEADLINE_S
    while True:
        try:
            return await call()
        except NatsTimeout:
            if anyio.current_time() >= deadline:
                break
            log.info("nats_request_retry", url=url, what=what)
            await anyio.sleep(0.2)
    raise RuntimeFailure(
        f"the NATS server at {url} did not answer ({what}) within {STREAMS_DEADLINE_S:g} s "
        "(is it overloaded, or restarting?)"
    )


@asynccontextmanager
async def connect(url: str, *, name: str = "rolecall") -> AsyncIterator[Link]:
    """A connection with the streams in place; a clear error when the server is unreachable."""
    import nats
    from nats.errors import NoServersError

    errors: list[str] = []

    async def quiet(exc: Exception) -> None:
        errors.append(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        log.info("nats_error", url=url, error=errors[-1])

    async def disconnected() -> None:
        log.info("nats_disconnected", url=url)

    hooks: list[Callable[[], None]] = []

    async def reconnected() -> None:
        log.warning("nats_reconnected", url=url)
        for hook in hooks:
            hook()

    try:
        # with reconnects unlimited nats-py would try a missing server forever: the first
        # connection gets CONNECT_DEADLINE_S, later ones as long as it takes
        with anyio.fail_after(CONNECT_DEADLINE_S):
            nc = await nats.connect(
                servers(url),
                name=name,
                connect_timeout=CONNECT_TIMEOUT_S,
                allow_reconnect=True,
                max_reconnect_attempts=-1,  # a lost connection is retried for as long as it takes
                reconnect_time_wait=0.2,
                error_cb=quiet,
                disconnected_cb=disconnected,
                reconnected_cb=reconnected,
            )
    except (NoServersError, OSError, TimeoutError) as exc:
        cause = errors[-1] if errors else f"{type(exc).__name__}: {exc or 'timed out'}"
        raise RuntimeFailure(
            f"cannot reach the NATS server at {url} ({cause}); is it running with JetStream "
            "(`nats-server -js`)? Nothing was started."
        ) from None
    try:
        js = nc.jetstream()
        await _streams_ready(js, url)
        yield Link(url, nc, js, hooks)
    finally:
        with anyio.CancelScope(shield=True):
            try:
                with anyio.move_on_after(DRAIN_S):  # a subscription left unread never drains
                    await nc.drain()
                if not nc.is_closed:
                    await nc.close()
            except Exception as exc:  # already closed, or the server went away
                log.info("nats_close", url=url, error=str(exc))
