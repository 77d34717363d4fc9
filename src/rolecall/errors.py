"""The one exception tree of rolecall.

::

    RolecallError
    ├── UsageError            the user asked for something invalid (exit code 2)
    │   ├── WorldError        a world file has problems (every one listed)
    │   ├── UnknownRoleError  a role id that no world or library has
    │   ├── UnsafeIdError     an id that could escape its folder if used in a path
    │   └── NotTextError      a file given to read as text is not UTF-8
    ├── RuntimeFailure        something outside the user's input failed (exit code 1)
    │   ├── ProviderError     the model provider failed after retries
    │   │   ├── ProviderTimeout
    │   │   ├── ProviderRefused   (4xx other than 408/429: auth, bad request, content policy)
    │   │   └── ProviderUnavailable (connection, 5xx, 429 after retries, broken stream)
    │   ├── StorageError      the data directory could not be read or written
    │   ├── SessionInUse      another live session goes on with this stored session
    │   └── ConditionTimeout  a regex condition ran past its time bound
"""

from __future__ import annotations

from collections.abc import Callable


class RolecallError(Exception):
    """Base class of every error rolecall raises on purpose."""


class UsageError(RolecallError):
    """Bad input from the user: a CLI argument, a world file, an id."""

    exit_code = 2


class WorldError(UsageError):
    """A world definition has one or more problems; all of them are in ``problems``."""

    def __init__(
        self,
        source: str,
        problems: list[str],
        warnings: list[str] | None = None,
        *,
        where: dict[str, str] | None = None,
    ):
        self.source = source
        self.problems = problems
        self.warnings = warnings or []
        self.where = where or {}  # a problem's "line L, column C" in the file, when known
        count = len(problems)
        noun = "problem" if count == 1 else "problems"
        body = "\n".join(
            f"  {self.where[p]}: {p}" if p in self.where else f"  {p}" for p in problems
        )
        super().__init__(f"{source}: {count} {noun}\n{body}")


class UnknownRoleError(UsageError):
    """A role id that is neither in the world nor in the role library."""


class UnsafeIdError(UsageError):
    """An id that is not safe to use as a file or folder name."""


class NotTextError(UsageError):
    """A file read as text (a world, a role, a session file, a list of values) is not UTF-8.

    ``problem`` says where, without the file: ``not UTF-8 text: byte 0xff at line 4,
    column 17``; the message is ``<source>: <problem> (save it as UTF-8)``.
    """

    def __init__(self, source: str, problem: str):
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem} (save it as UTF-8)")


class RuntimeFailure(RolecallError):
    """A failure outside the user's input; the session is kept and can be resumed."""

    exit_code = 1


class ProviderError(RuntimeFailure):
    """The model provider failed (after retries where retrying makes sense)."""

    def __init__(self, message: str, *, model: str = "", retryable: bool = False):
        self.model = model
        self.retryable = retryable
        super().__init__(message)


class ProviderTimeout(ProviderError):
    """The provider did not answer within the configured timeout."""


class ProviderRefused(ProviderError):
    """The provider refused the request (authentication, bad request, policy)."""


class ProviderUnavailable(ProviderError):
    """The provider could not be reached, was overloaded, or broke the stream."""


class StorageError(RuntimeFailure):
    """The data directory could not be read or written."""

    session_id: str | None = None  # the session it happened in, when there was one


class SessionInUse(RuntimeFailure):
    """Another live session (in this process or another) writes this stored session, or
    wrote to it since it was read: nothing was written."""

    def __init__(self, session_id: str, message: str):
        self.session_id = session_id
        super().__init__(message)

    @classmethod
    def held_by(cls, session_id: str, holder: str) -> SessionInUse:
        return cls(
            session_id,
            f"session {session_id} is open in {holder}: one live session at a time goes on "
            "with a stored session, so stop it there (or let it finish) and try again; "
            "nothing was written here",
        )

    @classmethod
    def changed(cls, session_id: str, stored: int, read: int) -> SessionInUse:
        return cls(
            session_id,
            f"session {session_id} changed in the store after it was read here (another "
            f"process went on with it: {stored} messages stored, {read} read): open it "
            "again; nothing was written here",
        )


class BatchInUse(RuntimeFailure):
    """Another process runs this batch (``rolecall batch`` or ``--resume``): nothing was
    run here."""

    def __init__(self, name: str, holder: str, again: str):
        self.name = name
        super().__init__(
            f"batch {name} is being run by {holder}: that process runs its remaining runs, "
            f"so nothing was run here; once it has ended, `{again}` finishes whatever it left"
        )


class ConditionTimeout(RuntimeFailure):
    """A ``regex:`` condition took longer than its bound (flows.md, Conditions)."""


def first_rolecall_error(
    group: BaseExceptionGroup[BaseException],
    convert: Callable[[BaseException], RolecallError | None] | None = None,
) -> RolecallError | None:
    """The first rolecall error inside a task group's exception group (nested or not).

    ``convert`` may turn another exception into one (the CLI: a damaged SQLite file).
    """
    for exc in group.exceptions:
        if isinstance(exc, RolecallError):
            return exc
        if convert is not None and (converted := convert(exc)) is not None:
            return converted
        if isinstance(exc, BaseExceptionGroup) and (found := first_rolecall_error(exc, convert)):
            return found
    return None
