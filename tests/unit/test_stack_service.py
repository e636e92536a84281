"""Service.ensure_running's readiness wait, with a stand-in process instead of a real server."""

import sys
from pathlib import Path

import pytest

from graph_ingest.settings.stack import StackSettings
from graph_ingest.stack.errors import StartupError
from graph_ingest.stack.layout import StackLayout
from graph_ingest.stack.process import is_ours, read_pid, remove_pid, spawn, terminate
from graph_ingest.stack.service import Service

pytestmark = pytest.mark.timeout(60)


class FakeService(Service):
    """Runs a python one-liner; 'ready' when the probe file exists."""

    name = "fake"
    port_fields = ("kafka_port",)

    def __init__(self, settings: StackSettings, layout: StackLayout, code: str) -> None:
        super().__init__(settings, layout)
        self.code = code
        self.launches = 0

    @property
    def ready_flag(self) -> Path:
        return self.layout.root / "ready.flag"

    def pid(self) -> int | None:
        pid = read_pid(self.layout.pid_file(self.name))
        return pid if pid is not None and is_ours(pid, "fake-service") else None

    def probe(self, timeout_s: float = 5.0) -> bool:
        return self.ready_flag.exists()

    def clean_stale(self) -> None:
        remove_pid(self.layout.pid_file(self.name))

    def launch(self) -> None:
        self.launches += 1
        spawn(
            [sys.executable, "-c", self.code, "fake-service"],
            log_path=self.log_path,
            pid_path=self.layout.pid_file(self.name),
        )

    def halt(self, pid: int, *, hard: bool) -> None:
        terminate(pid, timeout_s=5, hard=hard)

    def check_ports(self) -> None:
        """It binds no port."""


def make(tmp_path: Path, code: str, timeout_s: float = 1.0) -> FakeService:
    settings = StackSettings(run_dir=tmp_path, kafka_port=1, startup_timeout_s=timeout_s)
    return FakeService(settings, StackLayout.from_settings(settings), code)


def test_a_service_that_never_answers_times_out_naming_its_log(tmp_path: Path) -> None:
    service = make(
        tmp_path, "import time\nfor i in range(30): print('boot step', i)\ntime.sleep(60)"
    )

    with pytest.raises(StartupError) as caught:
        service.ensure_running()

    assert str(caught.value).splitlines()[0] == (
        f"fake did not become ready within 1 s; see {service.log_path}"
    )
    assert "boot step 29" in caught.value.details
    assert len(caught.value.details.splitlines()) == 20
    service.stop()


def test_a_service_that_dies_is_reported_at_once(tmp_path: Path) -> None:
    service = make(tmp_path, "import sys; print('bad config'); sys.exit(3)", timeout_s=30)

    with pytest.raises(StartupError, match="fake exited during startup") as caught:
        service.ensure_running()

    assert "bad config" in caught.value.details


def test_a_running_ready_service_is_left_alone(tmp_path: Path) -> None:
    service = make(tmp_path, "import time; time.sleep(60)")
    service.ready_flag.parent.mkdir(parents=True, exist_ok=True)
    service.ready_flag.touch()

    first = service.ensure_running()
    second = service.ensure_running()

    assert first.pid == second.pid is not None
    assert service.launches == 1
    assert service.stop() is True
    assert service.pid() is None
