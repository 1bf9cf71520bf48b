"""The image builder and the container target against the real Docker daemon: build offline
from a wheelhouse, run in the image, facts.

The builds are small (packaging and six on envmgr/base:bookworm) and share the builder's
cache, so the module takes about a minute on 2 cores. Every image it makes is under a
repository ``envmgr-test/backend-<random>`` and is removed at the end of the session, with the build-stage
layers that its builds left behind.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from envmgr.builders.base import Realized
from envmgr.builders.base import realize as build_steps
from envmgr.builders.dockerfile import BUILD_STAGE_LABEL
from envmgr.builders.image import ImageBuilder
from envmgr.confine import store_id
from envmgr.errors import BackendError, CommandNotFound, CommandTimeout
from envmgr.facts import collect_facts
from envmgr.spec.load import LoadedSpec, load_spec
from envmgr.targets.container import RUN_LABEL, ContainerTarget

pytestmark = pytest.mark.integration

# Must reach the container as the same text; a shell anywhere in between would run it.
SHELL_PAYLOAD = '$(touch /tmp/pwned); echo "x"'
# A newline cannot be carried by a Dockerfile: it must arrive as the two characters '\n'.
DESCRIPTION_PAYLOAD = 'line one\nRUN ["touch", "/tmp/pwned"]'
CU13 = "/opt/envmgr/venv/lib/python3.11/site-packages/nvidia/cu13"


def write_spec(directory: Path, six: str, python: str = "3.11") -> Path:
    data = {
        "apiVersion": "envmgr/v1",
        "metadata": {"name": "docker-it", "description": DESCRIPTION_PAYLOAD},
        "hardware": {"gpu": {"arch": "sm_90"}},
        "python": {"version": python, "packages": {"packaging": "24.2", "six": six}},
        # A pip toolkit sets CUDA_HOME and PATH (no nvcc wheel here: only the wiring is tested).
        "cuda": {"toolkits": [{"version": "13.0", "source": "pip"}]},
        "env": {"ENVMGR_PAYLOAD": SHELL_PAYLOAD, "ENVMGR_DEMO": "1"},
        "realize": {"backend": "docker"},
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@dataclass
class Build:
    backend: ContainerTarget  # runs in the image that was built
    loaded: LoadedSpec
    realized: Realized
    progress: list[str]
    seconds: float

    @property
    def tag(self) -> str:
        return self.realized.details["image"]


def realize(url: str, spec_path: Path, workdir: Path) -> Build:
    loaded = load_spec(spec_path)
    lines: list[str] = []
    started = time.monotonic()
    with ImageBuilder(url) as builder:
        realized = build_steps(builder, loaded, [], lines.append, workdir)
    return Build(ContainerTarget(realized.target), loaded, realized, lines, time.monotonic() - started)


@pytest.fixture(scope="module")
def repository(built_images):
    """This module's repository: its images, the parents their builds made and the build
    stages they left are removed at the end of the session (conftest.BuiltImages)."""
    return built_images.add_repository(f"envmgr-test/backend-{secrets.token_hex(4)}")


@pytest.fixture(scope="module")
def url(repository, base_image) -> str:
    return f"docker://{repository}?base={base_image}&wheelhouse=1"


@pytest.fixture(scope="module")
def first(url, tmp_path_factory) -> Build:
    root = tmp_path_factory.mktemp("docker-first")
    build = realize(url, write_spec(root, six="1.16.0"), root / "generation")
    yield build
    build.backend.close()


def containers_of(docker_client, tag: str) -> list:
    return docker_client.api.containers(all=True, filters={"label": RUN_LABEL, "ancestor": tag})


# --- realize ------------------------------------------------------------------------------


def test_realize_builds_a_tagged_image_with_the_specs_labels(first, repository, docker_client):
    repo, _, digest = first.tag.rpartition(":")
    assert repo == repository and len(digest) == 12 and int(digest, 16) >= 0
    assert first.realized.details["built"] is True
    assert first.realized.details["wheelhouse"] is True
    assert any(line.startswith("building ") for line in first.progress)
    assert any("[docker] Successfully built" in line for line in first.progress)
    assert first.realized.target == f"docker://{first.tag}"
    assert "packaging==24.2" in first.realized.lock and "six==1.16.0" in first.realized.lock

    image = docker_client.images.get(first.tag)
    assert image.id == first.realized.location
    assert image.labels["dev.envmgr.spec-digest"] == first.loaded.digest
    assert image.labels["dev.envmgr.spec-name"] == "docker-it"
    assert image.labels["org.opencontainers.image.description"] == DESCRIPTION_PAYLOAD.replace("\n", "\\n")
    assert BUILD_STAGE_LABEL[0] not in image.labels  # the build stage is not the image


def test_the_wheelhouse_is_in_the_context_but_not_in_the_image(first):
    context = Path(first.realized.details["context"])
    assert sorted(p.name for p in (context / "wheelhouse").iterdir()) == [
        "packaging-24.2-py3-none-any.whl", "six-1.16.0-py2.py3-none-any.whl"]
    result = first.backend.run(["sh", "-c", "ls /tmp/envmgr-wheelhouse /opt/envmgr"])
    assert "lock.txt" in result.stdout and "venv" in result.stdout
    assert "No such file" in result.stderr  # the wheelhouse stayed in the build stage


def test_run_uses_the_venv_with_the_locked_packages(first):
    result = first.backend.run(["python", "-c", "import packaging, six; print(packaging.__version__)"])
    assert (result.returncode, result.stdout, result.stderr) == (0, "24.2\n", "")
    assert result.argv[0] == "python"


def test_env_values_stay_literal_and_nothing_ran_them(first, docker_client):
    result = first.backend.run(["python", "-c", "import os; print(os.environ['ENVMGR_PAYLOAD'])"])
    assert result.stdout == SHELL_PAYLOAD + "\n"
    probe = first.backend.run(["sh", "-c", 'if [ -e /tmp/pwned ]; then echo yes; else echo no; fi'])
    assert probe.stdout == "no\n"
    # No step of the image's history is a shell command: RUN was exec form only.
    history = docker_client.api.history(first.tag)
    shell_steps = [h["CreatedBy"] for h in history
                   if h["CreatedBy"].startswith("/bin/sh -c") and "#(nop)" not in h["CreatedBy"]]
    ours = [step for step in shell_steps if "pwned" in step or "envmgr" in step]
    assert ours == []


def test_realize_again_unchanged_reuses_the_image(first, url, tmp_path):
    again = realize(url, write_spec(tmp_path, six="1.16.0"), tmp_path / "generation")
    assert again.tag == first.tag
    assert again.realized.location == first.realized.location
    assert again.realized.details["built"] is False
    assert any("already exists" in line and "not rebuilding" in line for line in again.progress)
    assert not any("[docker]" in line for line in again.progress)  # the builder was never called


def test_changing_one_pin_gives_another_tag(first, url, tmp_path, docker_client):
    changed = realize(url, write_spec(tmp_path, six="1.17.0"), tmp_path / "generation")
    assert changed.realized.details["built"] is True
    assert changed.tag != first.tag
    assert changed.tag.rpartition(":")[0] == first.tag.rpartition(":")[0]
    result = changed.backend.run(["python", "-c", "import six; print(six.__version__)"])
    assert result.stdout == "1.17.0\n"
    docker_client.images.get(first.tag)  # the previous image is still there


# --- run ----------------------------------------------------------------------------------


def test_stdout_stderr_and_exit_code_come_back_separately(first, docker_client):
    result = first.backend.run(["sh", "-c", "echo out; echo err >&2; exit 3"], env={"EXTRA": "v"})
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert first.backend.run(["sh", "-c", 'printf %s "$EXTRA"'], env={"EXTRA": "a b;$(x)"}).stdout == "a b;$(x)"
    assert containers_of(docker_client, first.tag) == []


def test_a_timeout_kills_the_container_and_removes_it(first, docker_client):
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="ran past 2s"):
        first.backend.run(["sleep", "30"], timeout=2)
    assert time.monotonic() - started < 15
    assert containers_of(docker_client, first.tag) == []


def test_a_missing_program_is_command_not_found(first, docker_client):
    with pytest.raises(CommandNotFound):
        first.backend.run(["no-such-program", "--version"])
    with pytest.raises(CommandNotFound):
        first.backend.run(["/opt/envmgr/venv/bin/no-such-program"])
    assert containers_of(docker_client, first.tag) == []


def test_a_url_naming_an_existing_image_runs_in_it(first):
    with ContainerTarget(f"docker://{first.tag}") as backend:
        assert backend.run(["python", "-c", "import six; print(six.__version__)"]).stdout == "1.16.0\n"


def test_envmgr_run_and_env_in_the_image(first, tmp_path):
    """`envmgr run --env docker://...` runs in a throwaway container of the image; `envmgr env`
    shows the image's ENV (the spec's, as data; CUDA_HOME and PATH of its pip toolkit)."""
    import json
    import subprocess
    import sys

    def envmgr(*args):
        return subprocess.run([sys.executable, "-m", "envmgr", *args], capture_output=True, text=True, timeout=300)

    ran = envmgr("run", "--env", f"docker://{first.tag}", "--", "python", "-c",
                 "import os, six; print(six.__version__, os.environ['ENVMGR_PAYLOAD'])")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"1.16.0 {SHELL_PAYLOAD}"
    assert envmgr("run", "--env", f"docker://{first.tag}", "--", "sh", "-c", "exit 5").returncode == 5
    shown = envmgr("env", "--env", f"docker://{first.tag}", "--json")
    assert shown.returncode == 0, shown.stderr
    env = json.loads(shown.stdout)["env"]
    # built outside any store: its values are hidden but for envmgr's own (issue 24)
    assert env["ENVMGR_PAYLOAD"] == "<redacted>" and env["CUDA_HOME"] == CU13
    assert "no generation of this store built" in json.loads(shown.stdout)["hidden_because"]
    assert env["PATH"].startswith(f"/opt/envmgr/venv/bin:{CU13}/bin:")
    # `envmgr shell` in an image: the docker CLI's `run -i` of it, commands piped in
    shell = subprocess.run([sys.executable, "-m", "envmgr", "shell", "--env", f"docker://{first.tag}"],
                           input='python -c "import six; print(six.__version__)"\n', capture_output=True,
                           text=True, timeout=300)
    assert shell.returncode == 0 and shell.stdout.strip() == "1.16.0", shell.stderr


def test_facts_inside_the_image_see_its_python_and_locked_packages(first):
    facts = collect_facts(first.backend, python=first.backend.interpreter)
    assert facts.python is not None
    assert facts.python.executable == "/opt/envmgr/venv/bin/python"
    assert facts.python.version.startswith("3.11.")
    assert facts.python.packages["packaging"] == "24.2"
    assert facts.python.packages["six"] == "1.16.0"
    assert facts.env["CUDA_HOME"] == CU13
    assert facts.env["PATH"].startswith(f"/opt/envmgr/venv/bin:{CU13}/bin:")
    assert facts.gpus == [] and "gpus" in facts.missing  # no nvidia runtime on the CI host


# --- errors -------------------------------------------------------------------------------


def test_a_missing_base_image_is_a_clear_error_before_any_work(repository, tmp_path, docker_client):
    builder = ImageBuilder(f"docker://{repository}?base=envmgr-test/no-such-base:none")
    with pytest.raises(BackendError, match="not in the local Docker daemon") as info:
        build_steps(builder, load_spec(write_spec(tmp_path, six="1.16.0")), [], lambda line: None, tmp_path / "g")
    assert "bootstrap-base.sh" in (info.value.hint or "")
    assert not (tmp_path / "g").exists()
    # through apply: a pre-flight check, before the plan is shown or a generation started
    from envmgr.apply import apply
    from envmgr.state import Store

    store = Store(tmp_path / "home")
    shown: list[object] = []
    with pytest.raises(BackendError, match="not in the local Docker daemon"):
        apply(load_spec(write_spec(tmp_path, six="1.16.0")), builder, store, lambda line: None,
              lambda actions, steps: shown.append(steps) or True)
    assert shown == [] and store.generations() == [] and not any(store.generations_dir.iterdir())


@pytest.mark.slow  # 8-12 s: a build of its own up to its failing step
def test_a_failing_build_is_a_backend_error_with_the_builds_last_lines(url, tmp_path):
    # The base image has python3 3.11: the build's first check stops a 3.12 spec.
    with pytest.raises(BackendError, match="building .* failed") as info:
        realize(url, write_spec(tmp_path, six="1.16.0", python="3.12"), tmp_path / "generation")
    message = str(info.value)
    assert "the spec wants 3.12" in message  # the RUN's own output, from the tail
    assert "Step " in message and "\x1b[" not in message  # no terminal colours


def test_an_unreachable_daemon_is_a_backend_error_with_a_hint(monkeypatch, tmp_path):
    pytest.importorskip("docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    backend = ContainerTarget("docker://envmgr-test/x:latest")
    with pytest.raises(BackendError, match="cannot reach the Docker daemon") as info:
        backend.run(["true"])
    assert "DOCKER_HOST" in (info.value.hint or "")
    assert info.value.__cause__ is not None


# --- gc -----------------------------------------------------------------------------------


def test_gc_removes_an_old_generations_image_but_not_one_a_kept_generation_uses(first, url, tmp_path, docker_client):
    """Issue 17: `envmgr gc` takes an old generation's image (and the build stages left dangling),
    never the image of the current generation or of the previous good one."""
    import json
    import subprocess
    import sys

    from docker.errors import ImageNotFound

    from envmgr.state import Store

    store = Store(tmp_path / "home")
    # built for this store (its folder under the store's generations/): its build stage carries
    # the store's label, so this gc may remove it
    old = realize(url, write_spec(tmp_path, six="1.17.0"), store.generations_dir / "0")
    assert old.tag != first.tag
    with store.locked():
        for build in (old, first, first):
            gen = store.commit(store.begin(), {"spec_name": "docker-it", "spec_digest": build.tag,
                                               "backend": build.realized.target, "backend_kind": "docker",
                                               "location": build.realized.location})
            store.record_gate(gen, [], [])
        store.switch(3)
    done = subprocess.run([sys.executable, "-m", "envmgr", "gc", "--keep", "0", "--home", str(store.home), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kept"] == [2, 3]
    images = [i for i in doc["items"] if i["kind"] == "image"]
    assert [(i["what"], i["generation"]) for i in images] == [(old.realized.location, 1)] and images[0]["size_bytes"] > 0
    assert doc["freed_bytes"] >= images[0]["size_bytes"]
    with pytest.raises(ImageNotFound):
        docker_client.images.get(old.realized.location)
    docker_client.images.get(first.realized.location)  # the kept generations' image stays
    # this store's dangling build stages are gone; another store's (the module's first build) are not its to remove
    mine = {"dangling": True, "label": ["=".join(BUILD_STAGE_LABEL), f"dev.envmgr.store={store_id(store.home)}"]}
    assert docker_client.images.list(filters=mine) == []
