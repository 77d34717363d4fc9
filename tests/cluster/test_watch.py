"""``rolecall watch`` as a user ends it: Ctrl-C."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.cluster.conftest import scripted_world
from tests.faults import Cli
from tests.nats_server import NatsServer


def test_ctrl_c_ends_watch_all_quietly_with_130(cli: Cli, nats: NatsServer, tmp_path: Path) -> None:
    world = scripted_world(tmp_path)
    ran = cli.run("run", str(world), "--nats", nats.url, "-q")
    assert ran.returncode == 0, ran.stderr
    watch = cli.popen("watch", "--all", "--from-start", "--json", "--nats", nats.url)
    assert watch.stdout is not None
    try:
        first = watch.stdout.readline()  # following the stream: the stored events come
        assert '"session_id"' in first, first
        watch.send_signal(signal.SIGINT)
        _, err = Cli.rest(watch, timeout=15)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
