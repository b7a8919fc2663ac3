"""Where the configuration and the state folder are: MIRRORFLOW_CONFIG (relative to AIRFLOW_HOME), MIRRORFLOW_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mirrorflow.config import ConfigError
from mirrorflow.config.location import StateDirError, config_path, state_dir, state_root


def test_the_configuration_is_taken_relative_to_airflow_home(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "mm2.properties").write_text("clusters = a\n")
    (tmp_path / "mm2.properties").write_text("clusters = a\n")
    env = {"AIRFLOW_HOME": str(tmp_path)}
    assert config_path(env) == tmp_path / "mm2.properties"  # unset: $AIRFLOW_HOME/mm2.properties
    assert config_path(env | {"MIRRORFLOW_CONFIG": "include/mm2.properties"}) == tmp_path / "include/mm2.properties"
    absolute = str(tmp_path / "include" / "mm2.properties")
    assert config_path({"MIRRORFLOW_CONFIG": absolute}) == Path(absolute)


def test_a_missing_configuration_is_one_line_naming_the_variable_and_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        config_path({"AIRFLOW_HOME": str(tmp_path), "MIRRORFLOW_CONFIG": "conf/mm2.properties"})
    (line,) = [str(p) for p in caught.value.problems]
    assert line == (
        "error: MIRRORFLOW_CONFIG=conf/mm2.properties (relative to AIRFLOW_HOME): "
        f"no configuration file at {tmp_path / 'conf' / 'mm2.properties'}"
    )
    with pytest.raises(ConfigError, match=r"MIRRORFLOW_CONFIG is not set, so the default \(relative to AIRFLOW_HOME\)"):
        config_path({"AIRFLOW_HOME": str(tmp_path)})
    assert config_path({"AIRFLOW_HOME": str(tmp_path)}, must_exist=False) == tmp_path / "mm2.properties"


def test_the_state_folder_defaults_outside_any_source_tree(tmp_path: Path) -> None:
    assert state_root({"HOME": "/x"}) == Path("~/.local/state/mirrorflow").expanduser()
    assert state_root({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "mirrorflow"
    assert state_root({"MIRRORFLOW_HOME": str(tmp_path / "s")}) == tmp_path / "s"
    made = state_dir("pyfiles", {"MIRRORFLOW_HOME": str(tmp_path / "s")})
    assert made == tmp_path / "s" / "pyfiles" and made.is_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: the permission check cannot fail")
def test_an_unwritable_state_folder_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(
        StateDirError, match=rf"^MIRRORFLOW_HOME: cannot create {locked / 'pyfiles'}: Permission denied$"
    ):
        state_dir("pyfiles", {"MIRRORFLOW_HOME": str(locked)})


def test_a_state_folder_that_is_a_file_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    blocker = tmp_path / "home"
    blocker.write_text("")
    with pytest.raises(StateDirError, match=rf"^MIRRORFLOW_HOME: cannot create {blocker / 'pyfiles'}: "):
        state_dir("pyfiles", {"MIRRORFLOW_HOME": str(blocker)})
