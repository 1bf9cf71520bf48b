"""Render the image's Dockerfile from a spec (template: ``images/Dockerfile.j2``).

A Dockerfile has no quoting that is safe for every string, so no spec value reaches it
raw. Each ``{{ ... }}`` in the template must pass one of these filters, and rendering
refuses any output that did not (the environment's ``finalize`` checks it):

- ``docker_str``: a JSON string for ENV and LABEL values. Newlines and control characters
  become JSON escapes (``\\n``), so a value can never end its line and start a new
  instruction; ``$`` is escaped so the builder does not substitute variables in it.
- ``exec_form``: a JSON array for RUN and COPY (exec form: no shell ever sees it).
- ``image_ref``: an image reference checked against Docker's grammar (FROM has no quoting).
- ``env_name``: a variable name checked against ``[A-Za-z_][A-Za-z0-9_]*``.

Only syntax of the classic builder is used (the Docker SDK builds without BuildKit): no
``RUN --mount``, no heredocs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

import jinja2

from envmgr.inherit import PTH_NAME
from envmgr.lock import source_args
from envmgr.secrets import holding_secrets
from envmgr.spec import models
from envmgr.spec.models import Spec
from envmgr.toolkits import pip_cuda_prefix

# images/Dockerfile.j2, reached through the envmgr/templates link so that installs from a
# wheel (where images/ is absent) carry it as package data
TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates"
TEMPLATE_NAME = "Dockerfile.j2"

# Where things live inside the image (the same in the build stage and the final one).
ENVMGR_ROOT = PurePosixPath("/opt/envmgr")
VENV = ENVMGR_ROOT / "venv"
WHEELHOUSE_DIR = "wheelhouse"  # in the build context
WHEELHOUSE = PurePosixPath("/tmp/envmgr-wheelhouse")  # in the build stage only
INHERIT_PTH = "inherit.pth"  # in the build context: the base's site-packages, after the venv's own

REPOSITORY_RE = re.compile(models.REPOSITORY_RE)
IMAGE_REF_RE = re.compile(models.IMAGE_REF_RE)
# On the build stage's layers (build cache, not in the final image): prune them with
# `docker image prune --filter label=dev.envmgr.stage=build`.
BUILD_STAGE_LABEL = ("dev.envmgr.stage", "build")
STORE_LABEL = "dev.envmgr.store"  # on the build stage too: gc removes only its own store's stages
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

# Fails the build early, with a clear message, when the base's python3 is not the spec's.
PYTHON_VERSION_CHECK = (
    "import sys; want = sys.argv[1]; have = '%d.%d' % sys.version_info[:2]; "
    "sys.exit(0 if have == want else "
    "'the base image has python3 ' + have + ', the spec wants ' + want + "
    "': choose a base image with python' + want)"
)


class Quoted(str):
    """Text a filter made safe for its place in a Dockerfile."""


def docker_str(value: object) -> Quoted:
    """A double-quoted Dockerfile word that the builder reads back as ``value``'s text.

    JSON escapes quotes, backslashes and control characters; ``$`` gets a backslash so the
    builder keeps it literal. Characters that are not printable (U+0085, U+2028, DEL ...)
    are written as ``\\uXXXX`` too, so no line-breaking character ever reaches the file.
    A Dockerfile cannot carry a newline in a value: it arrives as the two characters ``\\n``.
    """
    text = json.dumps(_as_text(value), ensure_ascii=False)
    text = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)
    return Quoted(text.replace("$", "\\$"))


def exec_form(argv: list[Any]) -> Quoted:
    """An exec-form JSON array (RUN/COPY); ``$`` is refused: COPY would substitute it."""
    if not isinstance(argv, list | tuple) or not argv:
        raise ValueError(f"exec form needs a non-empty list, got {argv!r}")
    items = [_as_text(a) for a in argv]
    for item in items:
        if "$" in item:
            raise ValueError(f"{item!r}: '$' is not allowed in an exec-form argument")
    return Quoted(json.dumps(items, ensure_ascii=True))


def image_ref(value: str) -> Quoted:
    """An image reference for FROM, which has no quoting: it must match Docker's grammar."""
    if not isinstance(value, str) or not IMAGE_REF_RE.fullmatch(value) or len(value) > 255:
        raise ValueError(f"{value!r} is not a docker image reference (like debian:bookworm)")
    return Quoted(value)


def env_name(value: str) -> Quoted:
    if not isinstance(value, str) or not ENV_NAME_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    return Quoted(value)


def label_pairs(pairs: list[tuple[str, Any]]) -> Quoted:
    """``"key"="value"`` pairs of one LABEL instruction, one pair per continuation line."""
    return _continued(f"{docker_str(key)}={docker_str(value)}" for key, value in pairs)


def env_pairs(pairs: list[tuple[str, Any]]) -> Quoted:
    """``NAME="value"`` pairs of one ENV instruction, one pair per continuation line."""
    return _continued(f"{env_name(name)}={docker_str(value)}" for name, value in pairs)


def _continued(items: Iterable[str]) -> Quoted:
    # One instruction (one build step) instead of one per pair; every line but the last
    # ends in the continuation backslash, which no quoted value can produce on its own.
    parts = list(items)
    if not parts:
        raise ValueError("an instruction needs at least one pair")
    return Quoted(" \\\n    ".join(parts))


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return str(value)  # like the venv backend and the planner: str(v)
    if isinstance(value, str | int | float | PurePosixPath):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} {value!r} into a Dockerfile")


def _require_quoted(value: object) -> object:
    # jinja2 calls this on every {{ ... }} result: a value that skipped the filters stops here.
    if not isinstance(value, Quoted):
        raise TypeError(f"unquoted value in the Dockerfile template: {value!r} "
                        f"(pass it through docker_str, exec_form, image_ref or env_name)")
    return value


def template_environment(template_dir: Path = TEMPLATE_DIR) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Dockerfile, not HTML: safety comes from the filters above
        finalize=_require_quoted,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(docker_str=docker_str, exec_form=exec_form, image_ref=image_ref,
                       env_name=env_name, label_pairs=label_pairs, env_pairs=env_pairs)
    return env


# --- what goes into the image -------------------------------------------------------------


def base_python(spec: Spec) -> str:
    """The base image's interpreter the venv is made from (``python.inherit.python``, else python3)."""
    inherit = spec.python.inherit
    return inherit.python if inherit is not None and inherit.python else "python3"


def site_packages(python_version: str) -> PurePosixPath:
    return VENV / "lib" / f"python{python_version}" / "site-packages"


def install_argv(spec: Spec, lock_path: PurePosixPath, wheelhouse: bool) -> list[str]:
    """pip installs exactly the lock: every file checked against its hash, no resolver. A venv
    that inherits has no pip of its own (ensurepip's pip and setuptools would shadow the
    base's): the base's pip installs into it (``--python``, pip >= 22.3)."""
    if spec.python.inherit is not None:
        pip = [base_python(spec), "-m", "pip", "--python", str(VENV / "bin" / "python")]
    else:
        pip = [str(VENV / "bin" / "python"), "-m", "pip"]
    argv = [*pip, "install", "--no-cache-dir",
            "--disable-pip-version-check", "--no-input", "--require-hashes", "--no-deps"]
    if wheelhouse:
        argv += ["--no-index", "--find-links", str(WHEELHOUSE)]
    else:
        argv += source_args(spec, "pip", local=False)  # find-links wheels come in the wheelhouse
    return [*argv, "-r", str(lock_path)]


def image_env(spec: Spec) -> list[tuple[str, str]]:
    """ENV of the final image, in order: VIRTUAL_ENV, a pip toolkit's CUDA_HOME, the spec's env.

    The spec's own CUDA_HOME wins over the pip toolkit's (as in the venv backend). Secrets
    (``envmgr.secrets``) are never baked into a layer, where ``docker history`` and anyone
    with the image would read them: ``envmgr bench`` gives them to the server's process at
    run time, and the build needs none (wheelhouse mode downloads on the host)."""
    env: dict[str, str] = {"VIRTUAL_ENV": str(VENV)}
    prefix = pip_cuda_prefix(spec, VENV)
    if prefix is not None and "CUDA_HOME" not in spec.env:
        env["CUDA_HOME"] = str(prefix)
    secret = holding_secrets(spec)  # a value that holds a secret is one: `docker history` shows ENV
    env.update({name: _as_text(value) for name, value in spec.env.items() if name not in secret})
    return list(env.items())


def path_prefix(spec: Spec) -> str:
    """What goes in front of the base image's PATH: the venv's bin, then a pip toolkit's."""
    dirs: list[PurePath] = [VENV / "bin"]
    prefix = pip_cuda_prefix(spec, VENV)
    if prefix is not None:
        dirs.append(prefix / "bin")
    return ":".join(str(d) for d in dirs)


def render_dockerfile(
    spec: Spec,
    *,
    base_image: str,
    lock_name: str,
    wheelhouse: bool,
    envmgr_version: str,
    spec_digest: str,
    template_dir: Path = TEMPLATE_DIR,
    store: str = "",
) -> str:
    """The Dockerfile text for ``spec``; ``lock_name`` (and ``wheelhouse/``) are in the context."""
    if not FILE_NAME_RE.fullmatch(lock_name):
        raise ValueError(f"{lock_name!r}: the lock must be a plain file name in the build context")
    lock_path = ENVMGR_ROOT / lock_name
    context = {
        "base_image": base_image,
        "build_labels": [BUILD_STAGE_LABEL, *([(STORE_LABEL, store)] if store else [])],
        "python_check": [base_python(spec), "-c", PYTHON_VERSION_CHECK, spec.python.version],
        "create_venv": [base_python(spec), "-m", "venv",
                        *(["--without-pip"] if spec.python.inherit is not None else []), str(VENV)],
        # after the install: pip never sees (so never touches) the base's packages
        "copy_inherit": [INHERIT_PTH, str(site_packages(spec.python.version) / PTH_NAME)]
        if spec.python.inherit is not None else None,
        "copy_lock": [lock_name, str(lock_path)],
        "copy_wheelhouse": [WHEELHOUSE_DIR, str(WHEELHOUSE)] if wheelhouse else None,
        "install": install_argv(spec, lock_path, wheelhouse),
        "copy_envmgr_root": [str(ENVMGR_ROOT), str(ENVMGR_ROOT)],  # the venv and the lock
        "labels": [
            ("dev.envmgr.spec-digest", spec_digest),
            ("dev.envmgr.version", envmgr_version),
            ("dev.envmgr.spec-name", spec.metadata.name),
            ("org.opencontainers.image.description", spec.metadata.description),
        ],
        "env": image_env(spec),
        "path_prefix": path_prefix(spec),
    }
    template = template_environment(template_dir).get_template(TEMPLATE_NAME)
    return template.render(**context)
