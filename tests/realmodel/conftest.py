from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import Cli, write_net_guard
from tests.realmodel import KEY_ENV, real_model_script
from tests.realmodel.proxy import RecordingProxy


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingProxy]:
    """The real model's server on 127.0.0.1 (once per pytest worker), behind a recording
    proxy. Without the server package the tests skip, saying so; under CI=true they fail
    instead (./scripts/test installs it: scripts/_model_venv.sh)."""
    script = real_model_script()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    try:
        server = script.LlamaServer(log=log)
    except script.ModelMissing as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real model is missing under CI: {missing}")
        pytest.skip(f"the real model is not installed ({missing})")
    server.start()
    proxy = RecordingProxy(server.base_url).start()
    try:
        yield proxy
    finally:
        proxy.stop()
        server.stop()


@pytest.fixture
def record(llama: RecordingProxy) -> RecordingProxy:
    """The proxy, its record emptied for this test."""
    llama.record.clear()
    return llama


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    guard = write_net_guard(tmp_path / "guard")
    return Cli(
        home=tmp_path / "home", guard=guard, cwd=tmp_path, env_extra={KEY_ENV: "no-key-needed"}
    )
