"""validate --check-index (issue 29): a pin no source has a release for is an error before apply
meets it; the sources are asked as apply would use them (find-links, then the indexes, offline
honoured); an index out of reach is a warning, never a verdict. The index here is a real HTTP
server on this machine serving the Simple API pages (JSON and HTML)."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest
import yaml

from envmgr.cli import main
from envmgr.pins import check_pins, index_filenames, versions_in
from envmgr.spec import load_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"
PAGES = {
    "/simple/packaging/": ("application/vnd.pypi.simple.v1+json", json.dumps({"meta": {"api-version": "1.0"}, "files": [
        {"filename": "packaging-24.2-py3-none-any.whl"}, {"filename": "packaging-24.2.tar.gz"},
        {"filename": "packaging-23.0-py3-none-any.whl"}]})),
    "/simple/six/": ("text/html", '<html><body><a href="../../files/six-1.17.0-py2.py3-none-any.whl#sha256=ab">six</a>'
                                  '<a href="six-1.16.0.tar.gz">six</a></body></html>'),
}


class Index(http.server.BaseHTTPRequestHandler):
    asked: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        Index.asked.append(self.path)
        page = PAGES.get(self.path)
        if page is None:
            self.send_error(404)
            return
        body = page[1].encode()
        self.send_response(200)
        self.send_header("Content-Type", page[0])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def index():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


def spec_with(tmp_path, packages: dict, sources: dict):
    data = yaml.safe_load((SPECS / "demo-cpu.yaml").read_text())
    data["python"]["packages"] = packages
    data["python"]["sources"] = sources
    data.pop("cuda", None)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path)


def test_pins_are_met_or_named_with_the_nearest_releases(tmp_path, index):
    loaded = spec_with(tmp_path, {"packaging": "==24.2", "six": "==1.99.0", "nope": "==1"}, {"index_url": index})
    findings = sorted(check_pins(loaded.spec, locate=loaded.locate), key=lambda f: f.field, reverse=True)
    assert [(f.id, f.field) for f in findings] == [("pin-not-on-index", "python.packages.six"),
                                                   ("pin-not-on-index", "python.packages.nope")]
    assert "nearest there: 1.17.0, 1.16.0" in findings[0].message and findings[0].where.endswith(
        f"{loaded.path}:{loaded.source.locate(('python', 'packages', 'six'))[1]}")
    assert "nope is not there at all" in findings[1].message


def test_wildcards_and_ranges_are_met_by_any_release(tmp_path, index):
    loaded = spec_with(tmp_path, {"packaging": "==24.*", "six": ">=1.16,<1.17"}, {"index_url": index})
    assert check_pins(loaded.spec) == []


def test_offline_asks_only_the_wheel_directories(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"")
    loaded = spec_with(tmp_path, {"six": "==1.17.0", "packaging": "==24.2"},
                       {"offline": True, "find_links": [str(wheels)]})

    def no_network(url):
        raise AssertionError(f"asked {url} although offline")

    (finding,) = check_pins(loaded.spec, fetch=no_network)
    assert finding.field == "python.packages.packaging" and "on find-links" in finding.message


def test_an_index_out_of_reach_is_a_warning_and_judges_nothing(tmp_path):
    loaded = spec_with(tmp_path, {"six": "==1.99.0"}, {"index_url": "http://127.0.0.1:9/simple"})
    (finding,) = check_pins(loaded.spec)
    assert finding.id == "index-unreachable" and finding.severity == "warning"
    assert "could not ask http://127.0.0.1:9/simple" in finding.message and "not checked" in finding.message


def test_the_cli_exits_1_on_a_missing_pin_and_only_asks_when_told(tmp_path, index, capsys):
    loaded = spec_with(tmp_path, {"six": "==1.99.0"}, {"index_url": index})
    Index.asked.clear()
    assert main(["validate", str(loaded.path)]) == 0 and Index.asked == []  # no network without the flag
    capsys.readouterr()
    assert main(["validate", str(loaded.path), "--check-index", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [f["id"] for f in out["findings"]] == ["pin-not-on-index"] and Index.asked == ["/simple/six/"]


def test_file_names_of_both_page_formats():
    assert versions_in(index_filenames(PAGES["/simple/six/"][1].encode()), "six") == {
        __import__("packaging.version").version.Version(v) for v in ("1.17.0", "1.16.0")}
    assert index_filenames(b"not json <a>no href</a>") == []
