"""The seam between targets (run commands) and builders (steps): registries by URL, capabilities
declared as class flags, and one list of steps that plan shows and apply executes."""

from __future__ import annotations

from pathlib import Path

import pytest

from envmgr.builders import open_builder
from envmgr.builders.base import Build, Builder, Realized, Step, execute, package_changes
from envmgr.builders.fleet import FleetBuilder
from envmgr.builders.image import ImageBuilder
from envmgr.builders.venv import VenvBuilder
from envmgr.errors import UsageError
from envmgr.plan import Action
from envmgr.spec import load_spec
from envmgr.targets import open_target
from envmgr.targets.container import ContainerTarget
from envmgr.targets.hosts import HostsTarget
from envmgr.targets.local import LocalTarget
from envmgr.targets.venv import VenvTarget

SPECS = Path(__file__).resolve().parents[2] / "specs"


@pytest.mark.parametrize(("url", "cls"), [
    ("local://", LocalTarget), ("venv:///opt/x", VenvTarget), ("docker://envmgr/x:abc", ContainerTarget),
    ("ansible://gpu?inventory=/h.yml", HostsTarget),
])
def test_a_url_opens_its_target_with_declared_capabilities(url, cls):
    target = open_target(url)
    assert type(target) is cls
    # what a server needs, and whether its processes are this machine's: said, never probed
    assert (cls.can_start, cls.runs_here) == {LocalTarget: (True, True), VenvTarget: (True, True),
                                              ContainerTarget: (True, False), HostsTarget: (False, False)}[cls]


def test_a_target_that_cannot_start_a_server_says_what_can():
    with pytest.raises(UsageError, match="cannot start a server") as info:
        HostsTarget("ansible://gpu?inventory=/h.yml").start(["python"])
    assert "docker://" in (info.value.hint or "")


@pytest.mark.parametrize(("url", "cls"), [
    ("venv://", VenvBuilder), ("docker://envmgr/x?base=debian:bookworm", ImageBuilder),
    ("ansible://gpu?inventory={inventory}", FleetBuilder),
])
def test_a_url_opens_its_builder(tmp_path, url, cls):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all: {hosts: {a: {}}}\n")
    builder = open_builder(load_spec(SPECS / "demo-cpu.yaml"), url.format(inventory=inventory))
    assert type(builder) is cls and cls.can_check is (cls is FleetBuilder)


def test_without_a_url_the_specs_backend_builds_with_the_specs_settings(tmp_path):
    loaded = load_spec(SPECS / "demo-cpu.yaml")
    builder = open_builder(loaded)
    assert type(builder).kind == loaded.spec.realize.backend
    assert isinstance(builder, VenvBuilder) and builder.where == loaded.spec.realize.venv.path


def test_settings_are_the_urls_else_the_specs_resolved_once_when_the_builder_is_made(tmp_path):
    loaded = load_spec(SPECS / "cuda13.yaml")
    image = ImageBuilder.from_spec(loaded, "docker://?base=debian:bookworm")
    assert image.settings is not None and image.settings.base == "debian:bookworm"  # the URL's
    assert image.settings.repository == (loaded.spec.realize.docker.tag or f"envmgr/{loaded.spec.metadata.name}")
    resolved = image.settings
    image.steps(loaded, []), image.bind(loaded)
    assert image.settings is resolved  # steps read them; nothing merged again
    with pytest.raises(UsageError, match="not a docker repository name"):
        ImageBuilder.from_spec(loaded, "docker://Not/A Repo")  # a wrong one fails as it is made
    with pytest.raises(UsageError, match="inventory .* does not exist"):
        FleetBuilder.from_spec(loaded, f"ansible://gpu?inventory={tmp_path / 'absent.yml'}")


def test_local_builds_nothing():
    with pytest.raises(UsageError, match="cannot build an environment") as info:
        open_builder(load_spec(SPECS / "demo-cpu.yaml"), "local://")
    assert "venv://" in (info.value.hint or "")


def test_venv_steps_are_listed_without_side_effects_and_honour_the_venv_root(tmp_path):
    loaded = load_spec(SPECS / "demo-cpu.yaml")
    steps = VenvBuilder(f"venv://{tmp_path}/envs").steps(loaded, [])
    assert [s.name for s in steps] == ["resolve", "venv", "install", "env"]
    assert f"{tmp_path}/envs/generation-N" in steps[1].summary
    assert "no package changes" in steps[2].summary
    assert not (tmp_path / "envs").exists()  # listing is the plan: nothing was made


def test_an_installer_the_venv_builder_lacks_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown installer"):
        VenvBuilder("venv://?installer=conda")


def test_execute_runs_the_steps_in_order_with_progress_and_returns_what_the_last_left(tmp_path):
    seen: list[str] = []

    def last(build: Build) -> None:
        build.realized = Realized("venv:///x", "/x", build.lock)

    steps = [Step("resolve", "lock it", lambda build: setattr(build, "lock", "six==1.16.0\n")),
             Step("venv", "make it", last)]
    realized = execute(steps, Build(load_spec(SPECS / "demo-cpu.yaml"), tmp_path, seen.append))
    assert seen[:2] == ["[1/2] lock it", "[2/2] make it"] and seen[2].startswith("built in ")
    assert "resolve " in seen[2] and "venv " in seen[2]  # each step's time
    assert (realized.target, realized.lock) == ("venv:///x", "six==1.16.0\n")


def test_a_step_that_fails_stops_the_ones_after_it(tmp_path):
    ran: list[str] = []

    def boom(build: Build) -> None:
        raise UsageError("the second step failed")

    steps = [Step("a", "a", lambda b: ran.append("a")), Step("b", "b", boom), Step("c", "c", lambda b: ran.append("c"))]
    with pytest.raises(UsageError, match="second step"):
        execute(steps, Build(load_spec(SPECS / "demo-cpu.yaml"), tmp_path, lambda line: None))
    assert ran == ["a"]


def test_apply_executes_exactly_the_steps_the_plan_listed(tmp_path):
    """plan and apply get their steps from one call (apply.plan_for): a builder whose steps are
    recorded shows that the list confirmed is the list run."""
    from envmgr.apply import apply
    from envmgr.state import Store

    loaded = load_spec(SPECS / "demo-cpu.yaml")
    ran: list[str] = []

    class Recording(Builder):
        kind = "venv"

        def steps(self, loaded, actions):
            def done(build: Build) -> None:
                ran.append("done")
                build.realized = Realized(f"venv://{build.workdir}/venv", str(build.workdir / "venv"), "x==1\n")

            return [Step("one", f"{len(actions)} action(s)", lambda build: ran.append("one")), Step("two", "last", done)]

    shown: list[list[str]] = []

    def confirm(actions, steps):
        shown.append([s.name for s in steps])
        return True

    result = apply(loaded, Recording(), Store(tmp_path / "home"), lambda line: None, confirm)
    assert result.status == "applied" and shown == [["one", "two"]] and ran == ["one", "done"]
    assert [s.name for s in result.steps] == ["one", "two"]
    recorded = (result.generation.path / "plan.json").read_text()
    assert '"step": "one"' in recorded and '"step": "two"' in recorded


def test_package_changes_read_as_a_diff():
    actions = [Action("package.install", "sglang-kernel", None, "==0.4.4", ""),
               Action("package.remove", "sgl-kernel", "==0.3.21", None, ""),
               Action("package.upgrade", "torch", "==2.9.1", "==2.10.0", ""),
               Action("env.set", "X", None, "1", "")]
    assert package_changes(actions) == "+sglang-kernel ==0.4.4, -sgl-kernel, torch ==2.9.1 -> ==2.10.0"
    assert package_changes(actions * 3, limit=2).endswith("(+7 more)")
    assert package_changes([]) == "no package changes"


def test_a_missing_interpreter_is_installed_by_uv_first_and_said_in_the_plan(tmp_path, monkeypatch):
    """No Python of the spec's version here: the plan's first step installs it with uv (issue 29).
    Offline (as this machine is for python-build-standalone), that step fails clearly, and no
    generation becomes current."""
    import yaml

    from envmgr.apply import apply
    from envmgr.errors import BackendError
    from envmgr.state import Store

    monkeypatch.setenv("UV_OFFLINE", "1")  # uv may not download: the failure is immediate and the same everywhere
    spec = tmp_path / "old-python.yaml"
    spec.write_text(yaml.safe_dump({"apiVersion": "envmgr/v1", "metadata": {"name": "old"},
                                    "hardware": {"gpu": {"arch": "sm_90"}},
                                    "python": {"version": "3.4", "packages": {"six": "1.16.0"}}}))
    shown: list[list[str]] = []
    store = Store(tmp_path / "home")
    with pytest.raises(BackendError, match="uv could not install Python 3.4") as info:
        apply(load_spec(spec), VenvBuilder(), store, lambda line: None,
              lambda a, steps: shown.append([s.summary for s in steps]) or True)
    assert "UV_PYTHON_INSTALL_MIRROR" in (info.value.hint or "")
    assert shown[0][0].startswith("install Python 3.4 with uv (none on this host)")
    assert store.current() is None


def test_an_interpreter_on_path_that_cannot_run_is_not_found(tmp_path, monkeypatch):
    """pyenv puts a python3.X shim on PATH for versions it has not selected: it exits 127."""
    from envmgr.builders.venv import find_interpreter, require_interpreter
    from envmgr.errors import BackendError

    shim = tmp_path / "python3.4"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.4: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert find_interpreter("3.4") is None
    with pytest.raises(BackendError, match="no Python 3.4 interpreter"):
        require_interpreter("3.4")
    good = tmp_path / "python3.5"
    good.write_text("#!/bin/sh\necho 3.5\n")
    good.chmod(0o755)
    assert find_interpreter("3.5") == str(good)


def test_shell_is_the_users_shell_here_docker_run_in_an_image_and_refused_on_hosts(monkeypatch):
    from envmgr.use import shell_argv

    monkeypatch.setenv("SHELL", "/bin/zsh")
    assert shell_argv(VenvTarget("/opt/v")) == ["/bin/zsh"]
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/docker" if name == "docker" else None)
    assert shell_argv(ContainerTarget("docker://envmgr/x:abc")) == [  # stdin is no terminal under pytest
        "/usr/bin/docker", "run", "--rm", "-i", "--network", "host", "--entrypoint", "/bin/sh", "envmgr/x:abc"]
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(UsageError, match="needs the docker CLI"):
        shell_argv(ContainerTarget("docker://envmgr/x:abc"))
    with pytest.raises(UsageError, match="no interactive shell") as info:
        shell_argv(HostsTarget("ansible://gpu?inventory=/h.yml"))
    assert "envmgr run --env" in (info.value.hint or "")
