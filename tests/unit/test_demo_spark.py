"""``SPARK=standalone make demo`` chooses the demo's Spark; anything else but ``local`` is refused up front."""

from __future__ import annotations

import pytest

from mirrorflow_dev.demo.spark_standalone import spark_mode


@pytest.mark.parametrize(("value", "mode"), [(None, "local"), ("", "local"), ("Standalone", "standalone")])
def test_spark_mode(monkeypatch: pytest.MonkeyPatch, value: str | None, mode: str) -> None:
    if value is None:
        monkeypatch.delenv("SPARK", raising=False)
    else:
        monkeypatch.setenv("SPARK", value)
    assert spark_mode() == mode


def test_an_unknown_spark_mode_names_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK", "yarn")
    with pytest.raises(ValueError, match="local or standalone"):
        spark_mode()
