"""The command line's arguments as typed values, made once from argparse's result.

argparse parses the words; each command's handler turns the ``Namespace`` into one of
these frozen values on its first line (:meth:`Options.of`) and passes that value down:
what runs a session (the store, the display, the hints it prints) reads typed fields,
never the ``Namespace``, and nothing changes a value after it is made (a choice made
later, as ``resume`` choosing its mode, is a new value: :func:`dataclasses.replace`).

Here are the values several modules share: the common flags, those of a command that runs
a session, ``run``/``chat``/``resume``'s, ``batch``'s and ``sessions``'. A command's own
value is beside its handler (``RolesOptions`` in manage/roles.py, ``StudyOptions`` in
study_cmd.py, ...). Kept light: it imports nothing of rolecall's.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields
from typing import Literal, Self


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """What most commands take (``cli/flags.py``): where the data is, how much to say,
    where logs go, the NATS server. A command without one of these flags gets its default."""

    data_dir: str | None = None  # --data-dir (else ROLECALL_HOME, else the platform's)
    quiet: bool = False  # -q
    verbose: int = 0  # -v, -vv
    log_file: str | None = None  # --log-file
    json: bool = False  # --json: events (or the result) as JSON on stdout
    nats: str | None = None  # --nats URL (else ROLECALL_NATS_URL)

    @classmethod
    def of(cls, args: argparse.Namespace) -> Self:
        """The value of the parsed ``args``: each field from the flag of the same name
        (its ``dest``); a field whose flag the command does not have keeps its default."""
        given = vars(args)
        return cls(**{f.name: given[f.name] for f in fields(cls) if f.name in given})


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions(Options):
    """The flags of a command that runs a session (``add_common_flags``): ``run``,
    ``chat``, ``resume``, the presets ``debate``, ``consensus`` and ``study``."""

    model: str | None = None  # --model: every non-scripted role's model
    session_file: str | None = None  # --session-file: rewritten on every turn
    max_turns: int | None = None  # --max-turns: the world's settings.max_turns
    max_cost: float | None = None  # --max-cost USD: settings.max_cost
    topic: str | None = None  # --topic
    replay: Literal["record", "replay", "replay-or-call"] | None = None  # --record, ...
    replay_file: str | None = None  # --replay-file
    approve: Literal["auto", "deny"] | None = None  # --approve
    mode: str | None = None  # --mode auto|step (resume: None until chosen)
    stream: Literal["preview", "full"] | None = None  # --stream: the REPL's streaming
    # resume --more-turns N: N more agent messages, then the session pauses (reason
    # more_turns); not the world's budget (max_turns) nor a flow's stop condition
    more_turns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorldOptions(SessionOptions):
    """``rolecall run WORLD`` and ``rolecall chat WORLD``."""

    world: str  # WORLD: a shipped world's name, a folder or a world.yaml path
    web: bool = False  # chat --web: talk in the web view instead


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeOptions(SessionOptions):
    """``rolecall resume SESSION``."""

    session: str  # SESSION: a session id (or prefix, or last) or a session file path


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchOptions(SessionOptions):
    """``rolecall batch``: the common flags of a command that runs sessions, and its own."""

    world: str | None = None  # WORLD (none with --resume)
    vary: list[str] = field(default_factory=list)  # --vary KEY=V1,V2, repeated
    runs: int = 1  # --runs N
    concurrency: int = 8  # --concurrency K
    name: str | None = None  # --name
    resume: str | None = None  # --resume NAME
    out: str | None = None  # --out FILE
    wait: bool = True  # --wait / --no-wait (with --nats)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionsOptions(Options):
    """``rolecall sessions ACTION`` (but ``import``, nats_cmd's): each action's
    arguments (None where it has none)."""

    sessions_command: str  # list, show, trace, export, delete, fork
    session: str = ""  # ID (every action but list has one)
    batch: str | None = None  # list --batch
    world: str | None = None  # list --world
    status: str | None = None  # list --status
    search: str | None = None  # list, show, export --search
    limit: int | None = None  # list --limit
    all: bool = False  # list --all
    tree: bool = False  # list --tree
    at: str = ""  # fork --at (required there)
    edit: str | None = None  # fork --edit
    model: str | None = None  # fork --model
    summaries: bool = False  # show --summaries
    format: str | None = None  # export --format
    out: str | None = None  # export --out
    role: str | None = None  # show, export --role
    as_role: str | None = None  # show, export --as
