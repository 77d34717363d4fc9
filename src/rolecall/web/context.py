"""What every page and API handler shares: the store, the live sessions, the templates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from rolecall.errors import RolecallError
from rolecall.export.common import pretty_data
from rolecall.paths import safe_id
from rolecall.storage.browse import state_of
from rolecall.storage.document import SessionDocument
from rolecall.storage.sqlite import SqliteStore
from rolecall.web import flowedit, render, snippet
from rolecall.web.runs import LiveRuns
from rolecall.world import catalog

if TYPE_CHECKING:
    from rolecall.web.cluster import Cluster, Feed

TEMPLATES = Path(__file__).parent / "templates"


def _templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.globals.update(
        markdown=render.markdown,
        marked=snippet.marked,
        short=render.short,
        pretty_data=pretty_data,
        until_value=flowedit.field_value,
    )
    templates.env.autoescape = True
    return templates


@dataclass
class WebContext:
    store: SqliteStore
    data_dir: Path
    worlds_dir: Path  # the local ./worlds folder (editable worlds live there)
    runs: LiveRuns
    token: str | None = None
    templates: Jinja2Templates | None = None
    cluster: Cluster | None = None  # rolecall web --nats URL

    def __post_init__(self) -> None:
        self.templates = _templates()

    def page(
        self, request: Request, template: str, status_code: int = 200, **values: Any
    ) -> Response:
        assert self.templates is not None
        response: Response = self.templates.TemplateResponse(
            request, template, {"request": request, **values}, status_code=status_code
        )
        return response

    @staticmethod
    def of(request: Request) -> WebContext:
        ctx: WebContext = request.app.state.ctx
        return ctx

    # ------------------------------------------------------------ lookups
    @staticmethod
    def session_id(request: Request) -> str:
        """The session id in the path, validated (404 for anything that is not an id)."""
        raw = str(request.path_params["sid"])
        try:
            return safe_id(raw, "session id")
        except RolecallError:
            raise HTTPException(404, f"no session {raw!r}") from None

    async def document(self, sid: str) -> SessionDocument:
        """The stored session; else, with ``--nats``, the session as the cluster holds it."""
        if await state_of(self.store, sid) is None:
            feed = await self.feed(sid)
            doc = feed.document() if feed is not None else None
            if doc is None:
                raise HTTPException(404, f"no session {sid!r}")
            return doc
        try:
            return await self.store.load(sid, with_events=False)
        except RolecallError as exc:
            raise HTTPException(404, str(exc)) from None

    async def feed(self, sid: str) -> Feed | None:
        """The session followed from the cluster's stream (``--nats``), if it is there."""
        return await self.cluster.feed(sid) if self.cluster is not None else None

    def world_path(self, name: str) -> tuple[Path, bool]:
        """A named world's file and whether the page may edit it: a local world only,
        and never a file of the shipped worlds, however it is reached (in a checkout
        ``./worlds`` is a link to the package's worlds; a world.yaml may be a link)."""
        path = catalog.find(name, self.worlds_dir)
        if path is None:
            raise HTTPException(404, f"no world {name!r}")
        mine = self.worlds_dir / name / "world.yaml"
        shipped = catalog.shipped_dir().resolve()
        local = mine.is_file() and not mine.resolve().is_relative_to(shipped)
        return path, local
