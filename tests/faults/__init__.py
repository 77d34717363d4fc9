"""Reliability suites: provider faults, process faults, concurrency.

Shared helpers live here (also used by ``tests/test_security.py``):

* :class:`Cli` runs ``rolecall`` in a subprocess with a private data directory and a
  network guard: a ``sitecustomize`` module put first on ``PYTHONPATH`` that refuses (and
  records) every connection and name lookup that is not for the loopback interface, so
  no subprocess of these suites can leave this machine, whatever litellm tries.
* Readers of what a run left behind: the SQLite store (read with plain ``sqlite3``,
  not through rolecall), the memory files, and checks that apply after every fault:
  message ids ``m1..mN`` contiguous, events gap-free, no secret anywhere.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A sitecustomize for subprocesses: no connection, no name lookup off the loopback
# interface. Refusals are appended to $ROLECALL_TEST_NET_LOG and fail the test.
NET_GUARD = '''
"""Test guard (tests/faults): refuse network access off the loopback interface."""
import os
import socket

_LOG = os.environ.get("ROLECALL_TEST_NET_LOG")
_LOCAL_NAMES = {"", "localhost", "localhost.localdomain", "ip6-localhost", "0.0.0.0", "::1"}


def _local(host):
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]").lower()
    return host in _LOCAL_NAMES or host.startswith("127.") or host == "0:0:0:0:0:0:0:1"


def _record(what, target):
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as out:
            out.write(f"{what} {target!r}\\n")


def _remote(sock, address):
    families = (socket.AF_INET, getattr(socket, "AF_INET6", socket.AF_INET))
    return sock.family in families and isinstance(address, tuple) and not _local(address[0])


_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo


def connect(self, address):
    if _remote(self, address):
        _record("connect", address)
        raise ConnectionRefusedError(111, f"test guard: no connection to {address!r}")
    return _connect(self, address)


def connect_ex(self, address):
    if _remote(self, address):
        _record("connect", address)
        return 111
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if not _local(host):
        _record("lookup", host)
        raise socket.gaierror(socket.EAI_NONAME, f"test guard: no lookup of {host!r}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.getaddrinfo = getaddrinfo
'''

# Variables of the caller's environment that must not leak into a test subprocess.
_DROPPED_ENV = (
    "ROLECALL_HOME",
    "ROLECALL_MODEL",
    "ROLECALL_STREAM_DELAY",
    "ROLECALL_NATS_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


def write_net_guard(folder: Path) -> Path:
    """Write the guard's ``sitecustomize.py`` into ``folder``; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(NET_GUARD, encoding="utf-8")
    return folder


@dataclass
class Cli:
    """``rolecall`` subprocesses with a data directory of their own and the net guard."""

    home: Path
    guard: Path
    cwd: Path
    env_extra: dict[str, str] = field(default_factory=dict)

    @property
    def net_log(self) -> Path:
        return self.guard / "refused.log"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        path = [str(self.guard), env.get("PYTHONPATH", "")]
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(p for p in path if p),
                "ROLECALL_TEST_NET_LOG": str(self.net_log),
                "ROLECALL_HOME": str(self.home),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "NO_PROXY": "*",
                "no_proxy": "*",
                "NO_COLOR": "1",
                "PYTHONDONTWRITEBYTECODE": "1",  # nothing appears beside the guard
            }
        )
        env.update(self.env_extra)
        env.update(extra)
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "rolecall.cli.main", *args]

    def run(
        self,
        *args: str,
        stdin: str | None = None,
        timeout: float = 50,
        prefix: Sequence[str] = (),
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        """Run to completion; ``prefix`` goes before the interpreter (a wrapper)."""
        return subprocess.run(
            [*prefix, *self.argv(*args)],
            cwd=self.cwd,
            env=self.env(**env),
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def popen(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.cwd,
            env=self.env(**env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @staticmethod
    def rest(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
        """What is left of ``proc``'s stdout, and its stderr, once it has ended.

        For a process whose stdout a test has read lines from: ``communicate()`` reads
        the pipes' descriptors directly, so the lines a ``readline()`` had already
        buffered past the one it returned would be lost. This reads the file objects.
        """
        stdout, stderr = proc.stdout, proc.stderr
        assert stdout is not None and stderr is not None
        parts: dict[str, str] = {}
        readers = [  # daemons: a process that never ends fails the test, not pytest's exit
            threading.Thread(target=lambda: parts.__setitem__("out", stdout.read()), daemon=True),
            threading.Thread(target=lambda: parts.__setitem__("err", stderr.read()), daemon=True),
        ]
        for reader in readers:
            reader.start()
        proc.wait(timeout=timeout)  # raises TimeoutExpired, as communicate() would
        for reader in readers:
            reader.join(timeout=timeout)
        stdout.close()
        stderr.close()
        return parts["out"], parts["err"]

    def refused_connections(self) -> list[str]:
        if not self.net_log.exists():
            return []
        return self.net_log.read_text("utf-8").splitlines()


# ------------------------------------------------------------------ the store
def connect(home: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection to the store of data directory ``home``."""
    path = home / "rolecall.db"
    assert path.is_file(), f"no session store at {path}"
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def session_ids(home: Path) -> list[str]:
    with closing(connect(home)) as db:
        return [sid for (sid,) in db.execute("SELECT id FROM sessions ORDER BY created_at, id")]


def only_session(home: Path) -> str:
    ids = session_ids(home)
    assert len(ids) == 1, f"expected one stored session, found {ids}"
    return ids[0]


@dataclass(frozen=True)
class Stored:
    """One session as the store holds it."""

    id: str
    state: str
    stop_reason: str | None
    pause_reason: str | None
    last_seq: int
    messages: list[dict[str, Any]]
    drafts: list[dict[str, Any]]
    event_seqs: list[int]
    message_events: list[str]  # message ids of the stored messages/message events
    generations: dict[str, int]  # sse/start events per message id: model calls begun
    steps: list[tuple[str, str | None]]  # execution log: (step id, message id)

    @property
    def ids(self) -> list[str]:
        return [m["id"] for m in self.messages]

    @property
    def contents(self) -> list[str]:
        return [m["content"] for m in self.messages]


def stored(home: Path, sid: str | None = None) -> Stored:
    sid = sid or only_session(home)
    with closing(connect(home)) as db:
        row = db.execute(
            "SELECT state, stop_reason, state_json, last_seq FROM sessions WHERE id = ?", (sid,)
        ).fetchone()
        assert row is not None, f"session {sid} is not stored"
        state, stop_reason, state_json, last_seq = row
        messages = [
            json.loads(body)
            for (body,) in db.execute(
                "SELECT body FROM messages WHERE session_id = ? ORDER BY idx", (sid,)
            )
        ]
        drafts = [
            json.loads(body)
            for (body,) in db.execute(
                "SELECT body FROM drafts WHERE session_id = ? ORDER BY idx", (sid,)
            )
        ]
        events = list(
            db.execute(
                "SELECT seq, topic, type, record FROM events WHERE session_id = ? ORDER BY seq",
                (sid,),
            )
        )
        steps = list(
            db.execute(
                "SELECT step_id, message_id FROM execution_log WHERE session_id = ? "
                "ORDER BY execution_order",
                (sid,),
            )
        )
    return Stored(
        id=sid,
        state=state,
        stop_reason=stop_reason,
        pause_reason=json.loads(state_json).get("pause_reason"),
        last_seq=last_seq,
        messages=messages,
        drafts=drafts,
        event_seqs=[seq for seq, *_ in events],
        message_events=[
            json.loads(record)["message_id"]
            for _, topic, kind, record in events
            if (topic, kind) == ("messages", "message")
        ],
        generations=dict(
            Counter(
                json.loads(record)["message_id"]
                for _, topic, kind, record in events
                if (topic, kind) == ("sse", "start")
            )
        ),
        steps=steps,
    )


def assert_intact(s: Stored, *, gap_free: bool = True) -> None:
    """No lost or duplicated committed message, no gap in the events.

    ``gap_free=False`` for a session imported from a session file, which leaves the
    streaming events out by design (their seqs are missing, the rest is ordered).
    """
    assert s.ids == [f"m{i}" for i in range(1, len(s.ids) + 1)], f"message ids {s.ids}"
    if gap_free:
        assert s.event_seqs == list(range(1, len(s.event_seqs) + 1)), "events have gaps"
    assert s.event_seqs == sorted(set(s.event_seqs))
    # the session row's last_seq may count an event published but never stored (resume
    # goes on from the last stored one); it is never behind what is stored
    assert s.last_seq >= (s.event_seqs[-1] if s.event_seqs else 0), "last_seq is behind"
    assert s.message_events == s.ids, (
        f"every message has exactly one stored message event: {s.message_events} for {s.ids}"
    )


# ------------------------------------------------------------------ memory files
def memory_ids(home: Path, sid: str) -> dict[str, list[str]]:
    """Message ids in each agent's memory file, in file order (torn lines skipped)."""
    out: dict[str, list[str]] = {}
    folder = home / "memory" / sid
    for path in sorted(folder.glob("*.jsonl")):
        ids = []
        for line in path.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                ids.append(json.loads(line)["message_id"])
            except (ValueError, KeyError):
                continue
        out[path.stem] = ids
    return out


def assert_memory_matches(home: Path, s: Stored, agents: Iterable[str]) -> None:
    """Every agent's memory file holds every committed message exactly once, in order."""
    found = memory_ids(home, s.id)
    for agent in agents:
        assert found.get(agent, []) == s.ids, f"memory of {agent}: {found.get(agent)} != {s.ids}"


# ------------------------------------------------------------------ secrets
def files_under(*roots: Path) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        if root.is_file():
            out.append(root)
        elif root.is_dir():
            out.extend(p for p in sorted(root.rglob("*")) if p.is_file())
    return out


def assert_secret_absent(secret: str, *, files: Iterable[Path], texts: Iterable[str]) -> int:
    """``secret`` appears in no file and no text; returns how many files were checked."""
    needle = secret.encode()
    checked = 0
    for path in files:
        assert needle not in path.read_bytes(), f"the secret leaked into {path}"
        checked += 1
    for i, text in enumerate(texts):
        assert secret not in text, f"the secret leaked into output #{i}"
    return checked
