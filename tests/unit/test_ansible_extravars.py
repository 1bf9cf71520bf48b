"""The fleet's pure parts: URL parsing, the driver branch, toolkit wheels and the
`envmgr` extra variable the playbooks read (plain data, the contract in playbooks/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envmgr.ansible.extravars import EXTRAVARS_CONTRACT, driver_choice, render_extravars
from envmgr.ansible.runner import playbook_dir
from envmgr.errors import UsageError
from envmgr.spec.load import load_spec
from envmgr.targets.urls import AnsibleURL as AnsibleTarget
from envmgr.targets.urls import parse_ansible_url
from envmgr.toolkits import toolkit_home_subdir, toolkit_requirements
from envmgr.wheelhouse import PreparedLock, lock_digest

SPEC = """\
apiVersion: envmgr/v1
metadata: {name: fleet}
hardware: {gpu: {arch: sm_120, count: 8}}
driver: {version: "%(driver)s"}
cuda:
  toolkits: [{version: "12.8"}, {version: "13.0", source: pip}]
  select: "13.0"
python:
  version: "3.12"
  packages: {packaging: "24.2"}
env:
  CUDA_HOME: /usr/local/cuda-13.0
  NCCL_P2P_DISABLE: 1
  TRICKY: "$(rm -rf /); echo 'x' \\"y\\""
realize:
  backend: ansible
  ansible: {inventory: hosts.yml, group: gpu, serial: "25%%", max_fail_percentage: 10}
"""


def spec(tmp_path: Path, driver: str = "580.95.05"):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC % {"driver": driver}, encoding="utf-8")
    return load_spec(path)


def prepared(name: str) -> PreparedLock:
    return PreparedLock(f"{name}-0123456789ab", "0123456789ab" + "0" * 52,
                        Path(f"/gen/ansible/files/{name}/lock.clean.txt"), Path(f"/cache/wheels/{name}"))


@pytest.mark.parametrize("url, expected", [
    ("ansible://gpu?inventory=hosts.yml", AnsibleTarget("gpu", "hosts.yml")),
    ("ansible://all?inventory=/x/h.yml&apt=offline&host_kind=container&reboot=0",
     AnsibleTarget("all", "/x/h.yml", apt_online=False, host_kind="container", reboot=False)),
    ("ansible://?inventory=h", AnsibleTarget("", "h")),
    ("ansible://gpu?inventory=h&probe=always", AnsibleTarget("gpu", "h", probe="always")),
])
def test_parse_url(url, expected):
    assert parse_ansible_url(url) == expected


@pytest.mark.parametrize("url, words", [
    ("ansible://gpu;rm?inventory=h", "not an inventory group"),
    ("ansible://gpu?inventory=h&colour=1", "unknown parameter"),
    ("ansible://gpu?inventory=h&apt=maybe", "apt="),
    ("ansible://gpu?inventory=h&host_kind=vm", "host_kind="),
    ("ansible://gpu?inventory=h&reboot=yes", "reboot="),
    ("ansible://gpu?inventory=h&probe=never", "probe="),
    ("docker://gpu", "not an ansible"),
])
def test_parse_url_refuses(url, words):
    with pytest.raises(UsageError, match=words):
        parse_ansible_url(url)


@pytest.mark.parametrize("version, branch, apt_version", [
    ("580.95.05", "580", "580.95.05-*"),
    ("==570.124.06", "570", "570.124.06-*"),
    (">=580,<581", "580", "580.*"),
    ("~=580.95", "580", "580.*"),
])
def test_driver_branch_and_pin(tmp_path, version, branch, apt_version):
    choice = driver_choice(spec(tmp_path, version).spec, reboot=True)
    assert (choice["branch"], choice["apt_version"], choice["reboot"]) == (branch, apt_version, True)


def test_driver_without_a_lower_bound_is_refused(tmp_path):
    with pytest.raises(UsageError, match="names no driver branch"):
        driver_choice(spec(tmp_path, "<600").spec, reboot=True)


def test_toolkit_wheels_are_held_to_the_series():
    assert toolkit_requirements("13.0.2") == {name: "==13.0.*" for name in (
        "nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-nvvm", "nvidia-cuda-crt")}
    assert toolkit_requirements("12.8") == {"nvidia-cuda-nvcc-cu12": "==12.8.*",
                                            "nvidia-cuda-runtime-cu12": "==12.8.*"}
    assert toolkit_home_subdir("13.0") == "nvidia/cu13"
    assert toolkit_home_subdir("12.8") == "nvidia/cuda_nvcc"


def test_lock_digest_depends_on_lock_and_python():
    assert lock_digest("a==1\n", "3.12") == lock_digest("a==1\n", "3.12")
    assert lock_digest("a==1\n", "3.12") != lock_digest("a==1\n", "3.11")
    assert lock_digest("a==1\n", "3.12") != lock_digest("a==2\n", "3.12")


def test_extravars_are_plain_data_from_the_spec(tmp_path):
    loaded = spec(tmp_path)
    target = parse_ansible_url("ansible://gpu?inventory=hosts.yml&apt=offline")
    extravars = render_extravars(loaded.spec, loaded.digest, target, "gpu", prepared("fleet"),
                                 {"13.0": prepared("cuda-13.0")})
    assert json.loads(json.dumps(extravars)) == extravars  # JSON all the way down
    envmgr = extravars["envmgr"]
    assert extravars["envmgr_group"] == "gpu"
    assert envmgr["contract"] == EXTRAVARS_CONTRACT
    assert envmgr["rollout"] == {"serial": "25%", "max_fail_percentage": 10}
    assert envmgr["apt_online"] is False and envmgr["host_kind"] == "auto"
    assert envmgr["driver"]["branch"] == "580"
    assert envmgr["python"] == {
        "version": "3.12", "env_id": "fleet-0123456789ab", "dir": "/opt/envmgr/envs/fleet-0123456789ab",
        "lock_digest": "0123456789ab" + "0" * 52, "lock_src": "/gen/ansible/files/fleet/lock.clean.txt",
        "wheels_src": "/cache/wheels/fleet"}
    # values stay data: the playbooks pass them as module arguments, never into a shell
    assert envmgr["env"] == {"CUDA_HOME": "/usr/local/cuda-13.0", "NCCL_P2P_DISABLE": "1",
                             "TRICKY": "$(rm -rf /); echo 'x' \"y\""}


def test_toolkits_side_by_side_with_the_selected_one(tmp_path):
    loaded = spec(tmp_path)
    extravars = render_extravars(loaded.spec, loaded.digest, AnsibleTarget("gpu", "h"), "gpu",
                                 prepared("fleet"), {"13.0": prepared("cuda-13.0")})
    apt, pip = extravars["envmgr"]["toolkits"]
    assert apt == {"version": "12.8", "release": "12.8", "source": "apt", "link": "/usr/local/cuda-12.8",
                   "priority": 1208, "selected": False, "apt_package": "cuda-toolkit-12-8"}
    assert pip["link"] == "/usr/local/cuda-13.0" and pip["selected"] is True
    assert pip["priority"] == 1300 and pip["home_subdir"] == "nvidia/cu13"
    assert pip["dir"] == "/opt/envmgr/toolkits/cuda-13.0-0123456789ab"


def test_playbooks_are_found():
    root = playbook_dir()
    for role in ("nvidia_driver", "cuda_toolkit", "python_env", "envmgr_probe"):
        assert (root / "roles" / role / "tasks" / "main.yml").is_file()
    assert (root / "site.yml").is_file() and (root / "command.yml").is_file()


def test_inventory_from_the_spec_is_relative_to_it(tmp_path):
    from envmgr.ansible.inventory import Fleet, fleet_url, resolve_fleet

    loaded = spec(tmp_path)  # realize.ansible: inventory hosts.yml, group gpu
    (tmp_path / "hosts.yml").write_text("gpu:\n  hosts:\n    a: {}\n", encoding="utf-8")
    parts = parse_ansible_url("ansible://?apt=offline")
    fleet = resolve_fleet(parts, loaded)
    assert fleet == Fleet(tmp_path / "hosts.yml", "gpu")
    # the URL it records reopens the same hosts from anywhere
    url = fleet_url(parts, fleet)
    assert url == f"ansible://gpu?inventory={tmp_path / 'hosts.yml'}&apt=offline"
    assert parse_ansible_url(url).inventory == str(tmp_path / "hosts.yml")


def test_a_missing_inventory_fails_before_any_download(tmp_path):
    from envmgr.builders.fleet import FleetBuilder
    from envmgr.targets.hosts import HostsTarget

    builder = FleetBuilder(f"ansible://gpu?inventory={tmp_path / 'absent.yml'}")
    with pytest.raises(UsageError, match="does not exist"):
        builder.steps(spec(tmp_path), [])  # listing the plan's steps already fails
    assert not (tmp_path / "gen").exists()
    with pytest.raises(UsageError, match="no inventory"):
        HostsTarget("ansible://gpu").run(["true"])


def probes(digest: str = "d1") -> dict:
    return {"scripts_src": "/gen/ansible/files/probes", "ids": ["gpu"], "args": {"gpu": {}}, "digest": digest}


def test_probe_key_names_the_environment_not_the_run(tmp_path):
    loaded = spec(tmp_path)

    def key(target=AnsibleTarget("gpu", "h"), python=prepared("fleet"),  # noqa: B008 - built once, on purpose
            toolkit=prepared("cuda-13.0"), probe=None, loaded=loaded) -> str:  # noqa: B008
        extravars = render_extravars(loaded.spec, loaded.digest, target, "gpu", python, {"13.0": toolkit},
                                     probe or probes())
        assert extravars["envmgr"]["probe"]["when"] == target.probe
        return extravars["envmgr"]["probe"]["key"]

    base = key()
    # how the rollout runs, and where the controller keeps its files, are not the environment
    assert key(target=AnsibleTarget("gpu", "h", reboot=False, probe="always")) == base
    moved = PreparedLock("fleet-0123456789ab", "0123456789ab" + "0" * 52, Path("/gen/7/lock.clean.txt"),
                         Path("/elsewhere/wheels"))
    assert key(python=moved) == base
    assert key(probe={**probes(), "scripts_src": "/gen/8/ansible/files/probes"}) == base
    # a new lock, toolkit, probe batch, env or driver is another environment
    assert key(python=PreparedLock("fleet-fedcba987654", "f" * 64, moved.lock_file, moved.wheels_dir)) != base
    assert key(toolkit=PreparedLock("cuda-13.0-fedcba987654", "e" * 64, moved.lock_file, moved.wheels_dir)) != base
    assert key(probe=probes("d2")) != base
    for name in ("env", "driver"):
        (tmp_path / name).mkdir()
    env_changed = tmp_path / "env" / "spec.yaml"
    env_changed.write_text((SPEC % {"driver": "580.95.05"}).replace("NCCL_P2P_DISABLE: 1", "NCCL_P2P_DISABLE: 0"))
    assert key(loaded=load_spec(env_changed)) != base
    assert key(loaded=spec(tmp_path / "driver", "580.105.08")) != base


def test_url_keeps_probe_always(tmp_path):
    from envmgr.targets.hosts import HostsTarget

    (tmp_path / "h.yml").write_text("all:\n  hosts:\n    a: {}\n", encoding="utf-8")
    target = HostsTarget(f"ansible://all?inventory={tmp_path / 'h.yml'}&probe=always")
    assert parse_ansible_url(target.url).probe == "always"
    assert "probe=" not in HostsTarget(f"ansible://all?inventory={tmp_path / 'h.yml'}").url


def test_every_string_reaches_ansible_marked_unsafe_in_a_0600_file(tmp_path, monkeypatch):
    """Issue 12: spec text is never a template (Ansible's __ansible_unsafe marker on every
    string), and the extra variables travel in a file, not on ansible-playbook's command line."""
    import json as json_module
    import sys
    import types

    from envmgr.ansible import extravars as backend
    from envmgr.ansible import runner

    data = {"envmgr": {"env": {"X": "{{ lookup('pipe', 'id') }}"}, "n": 1, "ok": True,
                       "list": ["a", {"b": "c"}]}, "envmgr_group": "all"}
    assert backend.unsafe(data) == {
        "envmgr": {"env": {"X": {"__ansible_unsafe": "{{ lookup('pipe', 'id') }}"}}, "n": 1, "ok": True,
                   "list": [{"__ansible_unsafe": "a"}, {"b": {"__ansible_unsafe": "c"}}]},
        "envmgr_group": {"__ansible_unsafe": "all"}}
    calls = []
    written = tmp_path / "env" / "extravars"

    def run(**kwargs):  # what ansible-runner finds while it runs (the file is gone after it)
        calls.append((kwargs, written.stat().st_mode & 0o777, json_module.loads(written.read_text())))
        return types.SimpleNamespace(status="ok")

    fake = types.SimpleNamespace(run=run)
    monkeypatch.setitem(sys.modules, "ansible_runner", fake)
    monkeypatch.setitem(sys.modules, "ansible_runner.exceptions", types.SimpleNamespace(AnsibleRunnerException=RuntimeError))
    runner.run_runner(tmp_path, "site.yml", tmp_path / "inventory", data, lambda event: None,
                        ident="apply", check=True)
    ((kwargs, mode, content),) = calls
    assert "extravars" not in kwargs and "lookup" not in str(kwargs.get("cmdline"))
    assert mode == 0o600
    assert content == backend.unsafe(data)


def test_ansible_core_reads_the_marker_as_text_it_never_renders(tmp_path):
    """The marker as the installed ansible-core loads an extra-vars file: the value is text
    that a template prints but never evaluates. The same file without the marker does run
    the lookup (the canary appears): the test would catch the hole."""
    pytest.importorskip("ansible")
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    try:  # ansible-core >= 2.19 renders only text marked as a trusted template
        from ansible.template import trust_as_template
    except ImportError:  # pragma: no cover - older ansible-core renders any string
        def trust_as_template(text):
            return text

    from envmgr.ansible.extravars import write_extravars

    def render(extravars_file):
        loader = DataLoader()
        try:  # as ansible-playbook loads `-e @file` (ansible.utils.vars.load_extra_vars)
            variables = loader.load_from_file(str(extravars_file), trusted_as_template=True)
        except TypeError:  # pragma: no cover - before 2.19 every loaded string is a template
            variables = loader.load_from_file(str(extravars_file))
        return Templar(loader=loader, variables=variables).template(trust_as_template("{{ value }}"))

    canary = tmp_path / "canary"
    payload = f"{{{{ lookup('pipe', 'touch {canary}') }}}}"
    assert render(write_extravars(tmp_path / "marked", {"value": payload})) == payload
    assert not canary.exists()
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"value": payload}))
    render(plain)
    assert canary.exists()  # without the marker Ansible runs it: what the marker prevents
