"""Rendering the image's Dockerfile: exec form only, quoted values, no injection."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from envmgr.builders.dockerfile import (
    TEMPLATE_NAME,
    VENV,
    Quoted,
    docker_str,
    env_pairs,
    exec_form,
    image_ref,
    render_dockerfile,
    template_environment,
)
from envmgr.spec.models import Spec
from envmgr.toolkits import pip_cuda_prefix

INSTRUCTIONS = {"FROM", "RUN", "COPY", "LABEL", "ENV"}  # all the template may use
DIGEST = "ab" * 32

HOSTILE = [
    '$(touch /tmp/pwned); echo "x"',
    "`touch /tmp/pwned`",
    "${PATH}$HOME",
    "line one\nRUN touch /tmp/pwned",
    "cr\rRUN touch /tmp/pwned",
    "crlf\r\nFROM scratch",
    "nel\x85RUN touch /tmp/pwned",
    "ls\u2028RUN touch /tmp/pwned",
    "ps\u2029RUN touch /tmp/pwned",
    "vt\x0bff\x0cnul\x00del\x7f",
    'quote " and \\" and \'single\'',
    "trailing backslash \\",
    "backslash newline \\\nRUN touch /tmp/pwned",
    '"]\nRUN ["touch", "/tmp/pwned"]',
    "# escape=`",
    "tab\there",
    "unicode é 漢字 🚀",
]


def make_spec(**overrides) -> Spec:
    data = {
        "apiVersion": "envmgr/v1",
        "metadata": {"name": "dtest", "description": "a test image"},
        "hardware": {"gpu": {"arch": "sm_90"}},
        "python": {"version": "3.11", "packages": {"packaging": "24.2", "six": "1.16.0"}},
        "env": {"ENVMGR_DEMO": "1"},
    }
    for key, value in overrides.items():
        data[key] = value
    return Spec.model_validate(data)


def render(spec: Spec, *, wheelhouse: bool = True, base_image: str = "envmgr/base:bookworm") -> str:
    return render_dockerfile(spec, base_image=base_image, lock_name="lock.txt", wheelhouse=wheelhouse,
                             envmgr_version="0.1.0", spec_digest=DIGEST)


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) per instruction, continuation lines joined; asserts the line shape.

    Every physical line is a comment before the first instruction, blank, an instruction from
    INSTRUCTIONS, or the continuation of a line that ended in `` \\``."""
    found: list[tuple[str, str]] = []
    continuing = False
    seen_instruction = False
    for line in dockerfile.split("\n"):
        assert "\r" not in line
        if continuing:
            assert line.startswith("    "), f"bad continuation line: {line!r}"
            keyword, rest = found[-1]
            found[-1] = (keyword, rest + " " + line.strip().removesuffix(" \\"))
        elif not line.strip():
            pass
        elif line.startswith("#"):
            assert not seen_instruction, f"comment among instructions: {line!r}"
        else:
            keyword, _, rest = line.partition(" ")
            assert keyword in INSTRUCTIONS, f"line does not start with a known instruction: {line!r}"
            seen_instruction = True
            found.append((keyword, rest.removesuffix(" \\")))
        continuing = line.endswith(" \\")
    assert not continuing, "the last line continues into nothing"
    return found


def docker_unquote(word: str) -> str:
    """What the classic builder reads from one double-quoted word (its escape rules:
    a backslash escapes '"', '$' and itself; any other backslash stays as it is)."""
    assert word.startswith('"') and word.endswith('"') and len(word) >= 2, word
    out, i, body = [], 0, word[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] in '"$\\':
            out.append(body[i + 1])
            i += 2
            continue
        assert ch != '"', f"unescaped quote inside {word!r}"
        assert ch != "$", f"unescaped $ (the builder would substitute it) in {word!r}"
        out.append(ch)
        i += 1
    return "".join(out)


def quoted_pairs(rest: str) -> dict[str, str]:
    """``KEY="v" "k2"="v2"`` -> {KEY: v, k2: v2} with the builder's unquoting."""
    word = r'"(?:[^"\\]|\\.)*"'
    pairs = re.findall(rf'({word}|[A-Za-z_][A-Za-z0-9_]*)=({word})', rest)
    leftover = re.sub(rf'({word}|[A-Za-z_][A-Za-z0-9_]*)=({word})', "", rest).strip()
    assert leftover == "", f"unparsed text in {rest!r}: {leftover!r}"
    return {(docker_unquote(k) if k.startswith('"') else k): docker_unquote(v) for k, v in pairs}


def expected_text(value: str) -> str:
    """Printable characters arrive as themselves; others as their JSON escape text."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    escaped = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in escaped)
    return escaped.replace('\\"', '"').replace("\\\\", "\\")


# --- shape --------------------------------------------------------------------------------


def test_demo_spec_renders_exec_form_runs_labels_and_quoted_env():
    spec = make_spec(cuda={"toolkits": [{"version": "13.0", "source": "pip"}]})
    text = render(spec)
    found = instructions(text)
    assert "--mount" not in text and "<<" not in text  # BuildKit-only syntax
    runs = [rest for keyword, rest in found if keyword == "RUN"]
    assert len(runs) == 3
    for rest in runs:
        argv = json.loads(rest)
        assert isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
    for keyword, rest in found:
        if keyword == "COPY":
            assert json.loads(rest.removeprefix("--from=build ")), rest
    froms = [rest for keyword, rest in found if keyword == "FROM"]
    assert froms == ["envmgr/base:bookworm AS build", "envmgr/base:bookworm"]

    labels = quoted_pairs([rest for keyword, rest in found if keyword == "LABEL"][-1])
    assert labels["dev.envmgr.spec-digest"] == DIGEST
    assert labels["dev.envmgr.version"] == "0.1.0"
    assert labels["dev.envmgr.spec-name"] == "dtest"

    env_lines = [rest for keyword, rest in found if keyword == "ENV"]
    env = quoted_pairs(env_lines[0])
    assert env["ENVMGR_DEMO"] == "1"
    assert env["VIRTUAL_ENV"] == "/opt/envmgr/venv"
    cu13 = "/opt/envmgr/venv/lib/python3.11/site-packages/nvidia/cu13"
    assert env["CUDA_HOME"] == cu13
    assert env_lines[1] == f'PATH="/opt/envmgr/venv/bin:{cu13}/bin":${{PATH}}'  # venv first


def test_wheelhouse_mode_installs_offline_with_hashes_from_the_copied_wheels():
    found = instructions(render(make_spec(), wheelhouse=True))
    copies = [json.loads(rest) for keyword, rest in found if keyword == "COPY" and rest.startswith("[")]
    assert ["wheelhouse", "/tmp/envmgr-wheelhouse"] in copies
    install = json.loads([rest for keyword, rest in found if keyword == "RUN"][-1])
    assert install[:4] == ["/opt/envmgr/venv/bin/python", "-m", "pip", "install"]
    for flag in ("--require-hashes", "--no-deps", "--no-index"):
        assert flag in install
    assert install[install.index("--find-links") + 1] == "/tmp/envmgr-wheelhouse"
    assert install[-2:] == ["-r", "/opt/envmgr/lock.txt"]


def test_online_mode_copies_no_wheels_and_passes_the_torch_index():
    spec = make_spec(python={"version": "3.12", "torch_cuda": "cu130",
                             "packages": {"torch": "2.9.1"}})
    text = render(spec, wheelhouse=False)
    assert "wheelhouse" not in text
    install = json.loads([rest for keyword, rest in instructions(text) if keyword == "RUN"][-1])
    assert "--no-index" not in install and "--require-hashes" in install
    assert install[install.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cu130"
    check = json.loads([rest for keyword, rest in instructions(text) if keyword == "RUN"][0])
    assert check[-1] == "3.12"  # the build stops early on a base image with another python3


def test_the_final_stage_copies_only_the_venv_and_lock_not_the_wheels():
    found = instructions(render(make_spec(), wheelhouse=True))
    second_from = [i for i, (keyword, _) in enumerate(found) if keyword == "FROM"][1]
    final = " ".join(rest for _, rest in found[second_from:])
    assert "wheelhouse" not in final
    assert '--from=build ["/opt/envmgr", "/opt/envmgr"]' in final


@pytest.mark.parametrize(("version", "expected"), [
    ("13.0", "nvidia/cu13"),
    ("13.1.1", "nvidia/cu13"),
    ("12.8", "nvidia/cuda_nvcc"),
])
def test_pip_toolkit_prefix_by_cuda_major(version, expected):
    spec = make_spec(cuda={"toolkits": [{"version": version, "source": "pip"}]})
    assert str(pip_cuda_prefix(spec, VENV)) == f"/opt/envmgr/venv/lib/python3.11/site-packages/{expected}"


def test_no_cuda_home_for_a_system_toolkit_and_the_specs_own_cuda_home_wins():
    apt = make_spec(cuda={"toolkits": [{"version": "13.0", "source": "apt"}]})
    env = quoted_pairs([rest for keyword, rest in instructions(render(apt)) if keyword == "ENV"][0])
    assert "CUDA_HOME" not in env
    own = make_spec(cuda={"toolkits": [{"version": "13.0", "source": "pip"}]},
                    env={"CUDA_HOME": "/usr/local/cuda-13.0"})
    env = quoted_pairs([rest for keyword, rest in instructions(render(own)) if keyword == "ENV"][0])
    assert env["CUDA_HOME"] == "/usr/local/cuda-13.0"


def test_env_values_of_every_type_are_written_as_text():
    spec = make_spec(env={"A_INT": 8, "A_FLOAT": 0.85, "A_BOOL": True, "A_STR": ""})
    env = quoted_pairs([rest for keyword, rest in instructions(render(spec)) if keyword == "ENV"][0])
    assert (env["A_INT"], env["A_FLOAT"], env["A_BOOL"], env["A_STR"]) == ("8", "0.85", "True", "")


# --- hostile values -----------------------------------------------------------------------


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_env_values_and_descriptions_stay_inside_their_quotes(payload):
    # The spec model refuses control characters in env values (test below); the renderer
    # must stay safe on its own, so the env is put past validation here.
    spec = make_spec(metadata={"name": "dtest", "description": payload})
    spec = spec.model_copy(update={"env": {"EVIL": payload, "AFTER": "ok"}})
    text = render(spec)
    found = instructions(text)  # asserts every line is an instruction or a continuation
    assert [keyword for keyword, _ in found] == [
        "FROM", "LABEL", "RUN", "RUN", "COPY", "COPY", "RUN", "FROM", "LABEL", "COPY", "ENV", "ENV"]
    assert "touch /tmp/pwned" not in "".join(rest for keyword, rest in found if keyword == "RUN")
    labels = quoted_pairs(found[8][1])
    env = quoted_pairs(found[10][1])
    assert labels["org.opencontainers.image.description"] == expected_text(payload)
    assert env["EVIL"] == expected_text(payload)
    assert env["AFTER"] == "ok"


@pytest.mark.parametrize("payload", [p for p in HOSTILE if not p.isprintable()])
def test_spec_refuses_control_characters_in_env_values(payload):
    with pytest.raises(ValidationError, match="control characters"):
        make_spec(env={"EVIL": payload})


@given(st.text())
def test_docker_str_is_one_line_and_reads_back_as_its_value(value):
    quoted = docker_str(value)
    assert len(quoted.splitlines()) <= 1 and "\n" not in quoted and "\r" not in quoted
    assert docker_unquote(quoted) == expected_text(value)
    if value.isprintable():
        assert docker_unquote(quoted) == value  # no loss for ordinary text


@given(st.lists(st.text().filter(lambda s: "$" not in s), min_size=1))
def test_exec_form_is_one_json_line_with_the_same_items(argv):
    quoted = exec_form(argv)
    assert "\n" not in quoted and "\r" not in quoted and "\u2028" not in quoted
    assert json.loads(quoted) == argv


@pytest.mark.parametrize("base", [
    "debian:bookworm\nRUN touch /tmp/pwned",
    "debian:bookworm\n",  # '$' of a regex matches before a final newline: fullmatch does not
    "debian bookworm",
    "Debian:bookworm",
    "debian:bookworm AS build",
    "",
    "$BASE",
])
def test_a_base_image_that_is_not_a_reference_is_refused(base):
    with pytest.raises(ValueError, match="not a docker image reference"):
        render(make_spec(), base_image=base)


@pytest.mark.parametrize("base", [
    "envmgr/base:bookworm",
    "nvidia/cuda:13.0.2-devel-ubuntu24.04",
    "localhost:5000/team/base:1.0",
    "debian@sha256:" + "0" * 64,
])
def test_real_image_references_are_accepted(base):
    assert image_ref(base) == base


def test_exec_form_refuses_dollar_and_env_names_are_checked():
    with pytest.raises(ValueError, match=r"'\$'"):
        exec_form(["echo", "$HOME"])
    for name in ("A B", "PATH\n", "A=B"):
        with pytest.raises(ValueError, match="not an environment variable name"):
            env_pairs([(name, "x")])
    with pytest.raises(ValueError, match="plain file name"):
        render_dockerfile(make_spec(), base_image="envmgr/base:bookworm", lock_name="../lock.txt",
                          wheelhouse=False, envmgr_version="0.1.0", spec_digest=DIGEST)


# --- the template engine ------------------------------------------------------------------


def test_a_missing_template_variable_raises():
    template = template_environment().get_template(TEMPLATE_NAME)
    with pytest.raises(jinja2.UndefinedError):
        template.render(base_image="envmgr/base:bookworm")


def test_a_value_without_a_quoting_filter_is_refused(tmp_path: Path):
    (tmp_path / TEMPLATE_NAME).write_text("FROM {{ base }}\nENV X={{ value | docker_str }}\n")
    template = template_environment(tmp_path).get_template(TEMPLATE_NAME)
    with pytest.raises(TypeError, match="unquoted value"):
        template.render(base="debian:bookworm\nRUN touch /tmp/pwned", value="x")
    assert isinstance(docker_str("x"), Quoted)


# --- docker:// URLs, the image builder's context, the container target (no daemon needed) ------

from envmgr.builders.image import ImageBuilder, context_hash  # noqa: E402
from envmgr.errors import BackendError, SpecError, UsageError  # noqa: E402
from envmgr.lock import clean_lock as image_lock  # noqa: E402
from envmgr.spec.load import load_spec  # noqa: E402
from envmgr.targets.container import ContainerTarget  # noqa: E402
from envmgr.targets.urls import DockerURL as DockerTarget  # noqa: E402
from envmgr.targets.urls import parse_docker_url  # noqa: E402


@pytest.mark.parametrize(("url", "expected"), [
    ("docker://", DockerTarget("")),
    ("docker://envmgr/demo", DockerTarget("envmgr/demo")),
    ("docker://envmgr/demo?base=envmgr/base:bookworm&wheelhouse=1",
     DockerTarget("envmgr/demo", None, "envmgr/base:bookworm", True)),
    ("docker://envmgr/demo?wheelhouse=0", DockerTarget("envmgr/demo", wheelhouse=False)),
    ("docker://envmgr/demo:0123456789ab", DockerTarget("envmgr/demo", "0123456789ab")),
    ("docker://localhost:5000/team/img", DockerTarget("localhost:5000/team/img")),
    ("docker://localhost:5000/team/img:v1", DockerTarget("localhost:5000/team/img", "v1")),
])
def test_docker_urls_parse(url, expected):
    assert parse_docker_url(url) == expected


@pytest.mark.parametrize("url", [
    "docker://Envmgr/Demo",
    "docker://envmgr/demo:bad tag",
    "docker://envmgr/demo?wheelhouse=maybe",
    "docker://envmgr/demo?pull=1",
    "docker://envmgr/demo?base=bad%20base",
    "docker://envmgr/demo?base=debian:bookworm%0ARUN%20x",
    "docker://envmgr/demo?base=debian:bookworm%0A",
    "docker://envmgr/demo%0A",
    "venv://x",
])
def test_bad_docker_urls_are_usage_errors(url):
    with pytest.raises(UsageError):
        parse_docker_url(url)


def test_importing_the_builder_and_target_does_not_import_the_docker_sdk():
    import subprocess
    import sys

    code = ("import sys, envmgr.builders.image, envmgr.targets.container; "
            "print('docker' in sys.modules, 'requests' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "False False\n"


def test_run_without_an_image_says_to_apply_first():
    target = ContainerTarget("docker://envmgr/demo")
    with pytest.raises(BackendError, match="names no image") as info:
        target.run(["true"])
    assert "docker://REPOSITORY:TAG" in (info.value.hint or "")
    assert ContainerTarget("docker://envmgr/demo:abc").url == "docker://envmgr/demo:abc"
    assert not ContainerTarget.runs_here and ContainerTarget.can_start


def _spec_file(tmp_path: Path, docker: dict) -> Path:
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "envmgr/v1", "metadata": {"name": "dtest"},
        "hardware": {"gpu": {"arch": "sm_90"}}, "realize": {"backend": "docker", "docker": docker}}))
    return path


def test_a_bad_repository_or_base_is_a_located_spec_error(tmp_path):
    for options, field in (({"tag": "Not/A Repo", "base_image": "debian:bookworm"}, "realize.docker.tag"),
                           ({"tag": "x?base=evil:1&wheelhouse=1"}, "realize.docker.tag"),
                           ({"base_image": "debian:bookworm\nRUN x"}, "realize.docker.base_image")):
        with pytest.raises(SpecError) as info:
            load_spec(_spec_file(tmp_path, options))
        (problem,) = info.value.problems
        assert problem.field == field and problem.line and "docker" in problem.expected


def test_the_plan_refuses_a_bad_url_or_no_base_before_touching_the_daemon(tmp_path):
    no_base = load_spec(_spec_file(tmp_path, {}))
    with pytest.raises(UsageError, match="not a docker repository name"):
        ImageBuilder("docker://Not/A Repo").steps(no_base, [])
    with pytest.raises(UsageError, match="not an image reference"):
        ImageBuilder("docker://?base=debian:bookworm%0ARUN%20x").steps(no_base, [])
    with pytest.raises(UsageError, match="no base image"):
        ImageBuilder("docker://").steps(no_base, [])


def test_the_image_steps_are_listed_without_the_daemon(tmp_path):
    loaded = load_spec(_spec_file(tmp_path, {"base_image": "debian:bookworm", "wheelhouse": True}))
    steps = ImageBuilder("docker://envmgr/demo").steps(loaded, [])
    assert [s.name for s in steps] == ["base", "resolve", "context", "image"]
    assert "debian:bookworm" in steps[0].summary and "wheelhouse" in steps[2].summary
    assert "envmgr/demo:<context hash>" in steps[3].summary


def test_the_image_lock_drops_comments_that_name_the_workdir():
    lock = ("packaging==24.2 \\\n    --hash=sha256:aa\n    # via -r /tmp/gen/7/requirements.in\n"
            "\nsix==1.16.0 \\\n    --hash=sha256:bb\n    # via -r /tmp/gen/7/requirements.in\n")
    assert image_lock(lock) == "packaging==24.2 \\\n    --hash=sha256:aa\nsix==1.16.0 \\\n    --hash=sha256:bb\n"
    assert image_lock(lock) == image_lock(lock.replace("/tmp/gen/7", "/srv/other"))


def test_the_context_hash_follows_dockerfile_lock_wheels_and_base(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / "lock.txt").write_text("six==1.16.0\n")
    (tmp_path / "wheelhouse").mkdir()
    (tmp_path / "wheelhouse" / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"one")
    first = context_hash(tmp_path, "sha256:base1")
    assert context_hash(tmp_path, "sha256:base1") == first
    assert context_hash(tmp_path, "sha256:base2") != first
    (tmp_path / "wheelhouse" / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"two")
    second = context_hash(tmp_path, "sha256:base1")
    assert second != first
    (tmp_path / "lock.txt").write_text("six==1.17.0\n")
    assert context_hash(tmp_path, "sha256:base1") != second


class _FakeApi:
    """Just enough of docker.APIClient for the host config choice."""

    def __init__(self, runtimes: dict) -> None:
        self.runtimes = runtimes

    def info(self) -> dict:
        return {"Runtimes": self.runtimes}

    def create_host_config(self, **kwargs) -> dict:
        return kwargs


def test_gpus_are_requested_only_where_the_daemon_has_the_nvidia_runtime():
    pytest.importorskip("docker")
    with_gpus = ContainerTarget("docker://x:y")._host_config(_FakeApi({"runc": {}, "nvidia": {}}))
    (request,) = with_gpus["device_requests"]
    assert (request["Count"], request["Capabilities"]) == (-1, [["gpu"]])
    assert with_gpus["shm_size"] == "16g"
    assert ContainerTarget("docker://x:y")._host_config(_FakeApi({"runc": {}})) == {}
