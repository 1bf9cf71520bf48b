"""validate --check-index against the real PyPI (issue 29): the pin that does not exist is an
error at its spec line; the demo's real pins all have releases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envmgr.cli import main

pytestmark = pytest.mark.integration
SPECS = Path(__file__).resolve().parents[2] / "specs"


def test_a_pin_pypi_has_no_release_of_is_an_error_and_real_pins_pass(tmp_path, capsys):
    assert main(["validate", str(SPECS / "demo-cpu.yaml"), "--check-index", "--json"]) == 0
    assert [f["id"] for f in json.loads(capsys.readouterr().out)["findings"]
            if f["id"] in ("pin-not-on-index", "index-unreachable")] == []
    bad = tmp_path / "bad.yaml"
    bad.write_text((SPECS / "demo-cpu.yaml").read_text().replace('nvidia-cuda-nvcc: "13.0.88"', 'nvidia-cuda-nvcc: "13.0.999"'))
    assert main(["validate", str(bad), "--check-index", "--json"]) == 1
    (finding,) = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["id"] == "pin-not-on-index"]
    assert finding["field"] == "python.packages.nvidia-cuda-nvcc" and finding["where"].startswith(f"{bad}:")
    assert "13.0.88" in finding["message"]  # the release that exists, named as the nearest
