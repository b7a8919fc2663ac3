"""The demo's PostgreSQL server: the commands and settings it is started with, checked without starting it.

Why these matter: a server listening beyond loopback, a password on a command line or in a log, a socket
path too long for the kernel, or root running initdb each show up only on some machine, as a demo that
does not start; here they are checked on every run.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from mirrorflow_dev.demo import postgres
from mirrorflow_dev.demo.postgres import (
    DB_NAME,
    DB_USER,
    PostgresError,
    PostgresServer,
    RunAs,
    as_user,
    database_url,
    initdb_command,
    postgres_bin_dir,
    server_command,
    socket_dir_option,
)

BIN = Path("/opt/pg/bin")


def test_pgserver_ships_the_binaries() -> None:
    bin_dir = postgres_bin_dir()
    for name in ("initdb", "postgres", "pg_ctl"):
        assert os.access(bin_dir / name, os.X_OK), name


def test_initdb_makes_a_password_protected_superuser(tmp_path: Path) -> None:
    cmd = initdb_command(BIN, tmp_path / "data", tmp_path / "pw")
    assert cmd[0] == str(BIN / "initdb")
    assert cmd[cmd.index("-D") + 1] == str(tmp_path / "data")
    assert cmd[cmd.index("-U") + 1] == DB_USER
    assert f"--pwfile={tmp_path / 'pw'}" in cmd  # the password itself is never on a command line
    assert "--auth=scram-sha-256" in cmd and "--encoding=UTF8" in cmd and "--locale=C" in cmd


def test_server_listens_on_loopback_only_with_its_socket_under_the_state_dir(tmp_path: Path) -> None:
    cmd = server_command(BIN, tmp_path / "data", 15432, tmp_path / "run")
    assert cmd[:3] == [str(BIN / "postgres"), "-D", str(tmp_path / "data")]
    assert cmd[cmd.index("-h") + 1] == "127.0.0.1"
    assert cmd[cmd.index("-p") + 1] == "15432"
    assert cmd[cmd.index("-k") + 1] == str(tmp_path / "run")
    settings = dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "-c")
    assert int(settings["max_connections"]) >= 100  # Airflow's components each keep a pool of connections


def test_a_socket_path_too_long_for_the_kernel_means_tcp_only() -> None:
    assert socket_dir_option(Path("/tmp/x/run"), 5432) == "/tmp/x/run"
    assert socket_dir_option(Path("/tmp/" + "d" * 100), 5432) == ""  # no Unix socket; TCP still works


def test_database_url_uses_psycopg2_and_quotes_the_password() -> None:
    url = database_url(15432, "a/b@c")
    assert url == f"postgresql+psycopg2://{DB_USER}:a%2Fb%40c@127.0.0.1:15432/{DB_NAME}"


def test_as_root_the_commands_run_as_an_unprivileged_user_with_the_same_pid() -> None:
    user = RunAs("nobody", 65534, 65534)
    cmd = as_user(user, ["/opt/pg/bin/postgres", "-D", "/d"])
    assert cmd[0] == sys.executable and cmd[-3:] == ["/opt/pg/bin/postgres", "-D", "/d"]
    assert "65534" in cmd and "os.execv" in cmd[2]  # exec: the recorded PID is the postmaster itself
    assert as_user(None, ["x"]) == ["x"]


def test_run_as_is_nobody_only_for_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres.os, "geteuid", lambda: 1000)
    assert postgres.run_as() is None
    monkeypatch.setattr(postgres.os, "geteuid", lambda: 0)
    user = postgres.run_as()
    assert user is not None and user.name == "nobody" and user.uid != 0


def test_password_is_generated_once_private_and_not_in_the_repr(tmp_path: Path) -> None:
    server = PostgresServer(tmp_path / "pg")
    password = server.password()
    assert len(password) >= 24 and server.password() == password
    assert stat.S_IMODE(server.password_file.stat().st_mode) == 0o600
    assert password not in repr(server)


def test_a_lost_password_file_of_an_initialised_database_is_explained(tmp_path: Path) -> None:
    server = PostgresServer(tmp_path / "pg")
    server.data_dir.mkdir(parents=True)
    (server.data_dir / "PG_VERSION").write_text("16\n")
    with pytest.raises(PostgresError, match="Delete .*data"):
        server.password()


def test_not_running_means_no_port_and_stop_is_idempotent(tmp_path: Path) -> None:
    server = PostgresServer(tmp_path / "pg")
    assert not server.running() and server.port is None
    assert server.stop() == "not running"
    with pytest.raises(PostgresError, match="not running"):
        server.database_url()


def test_an_untraversable_parent_is_named(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    root = locked / "demo" / "postgres"
    root.mkdir(parents=True)
    locked.chmod(0o700)
    user = RunAs("nobody", 65534, 65534)
    with pytest.raises(PostgresError, match=f"{locked} is not traversable"):
        postgres._check_reachable(root, user)
