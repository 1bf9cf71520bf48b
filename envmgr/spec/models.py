"""The environment spec, ``apiVersion: envmgr/v1``, as pydantic models.

Plain data: no I/O here. Loading (YAML, ``extends:``, file:line errors) is in
``envmgr.spec.load``. Every model forbids unknown keys so that a typo is an error,
not a silently ignored setting.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal, Union
from urllib.parse import urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from envmgr import backends
from envmgr.versions import exact_pin, specifier_size_problem, version_size_problem

API_VERSION = "envmgr/v1"

NAME_RE = r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$"
ARCH_RE = r"^sm_[0-9]{2,3}[af]?$"
PACKAGE_RE = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?$"
ENV_NAME_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"
FLAG_RE = r"^--[a-z0-9][a-z0-9-]*$"
CUDA_TAG_RE = r"^cu[0-9]{3}$"
TOOLKIT_VERSION_RE = r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"
# Docker's reference grammar (distribution/reference): [host[:port]/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)"
REPOSITORY_RE = rf"^{_HOST}?{_COMPONENT}(?:/{_COMPONENT})*$"
# (a tag is ASCII word characters, as in Go's \w; a Unicode \w{0,127} costs pydantic's regex
# engine 40 ms to compile on every start)
IMAGE_REF_RE = rf"^{_HOST}?{_COMPONENT}(?:/{_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?$"
# An Ansible group (or host) name: it becomes the play's `hosts:` and part of a backend URL.
GROUP_RE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"

# Sizes no real stack comes near (a host keeps two or three CUDA toolkits, a spec pins a few
# dozen packages, SGLang has about 600 flags, a sweep of 1000 configs is weeks of launches):
# beyond them a spec is generated or broken, and refusing it keeps every command fast.
MAX_TOOLKITS = 16
MAX_PACKAGES = 500
MAX_ENV = 500
MAX_FLAGS = 600
MAX_CONFIGS = 1000
MAX_PROBES = 64
MAX_FLAG_NUMBER = 2 ** 63 - 1  # a whole-number flag value (SGLang's sizes, ports, seeds) fits 64 bits


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_specifier(value: str) -> str:
    """A PEP 440 specifier; a bare version means an exact pin (``2.9.1`` -> ``==2.9.1``)."""
    value = value.strip()
    _check_size(specifier_size_problem(value), "a version like 2.9.1 or a specifier like '>=2.9,<2.10'")
    try:
        Version(value)
        return f"=={value}"
    except InvalidVersion:
        pass
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(
            f"{value!r} is not a version or PEP 440 specifier (like '2.9.1', '==2.9.1' or '>=2.9,<2.10')"
        ) from None
    if not value:
        raise ValueError("empty specifier: write a version, or remove the entry")
    return value


def _check_size(problem: str | None, example: str) -> None:
    # before packaging parses a number of it: Python's int() refuses over 4300 digits
    if problem:
        raise ValueError(f"{problem}; write {example}")


def _check_toolkit_size(value: str) -> str:
    _check_size(version_size_problem(value), "a CUDA version like 12.8 or 13.0.2")
    return value


def _control_characters(value: str) -> list[str]:
    return sorted({repr(c) for c in value if ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029"})


def _check_env_text(value: str) -> str:
    # An environment value is one line of text: a newline cannot cross a Dockerfile ENV,
    # an env file or a shell profile intact, so refuse it rather than mangle it.
    bad = _control_characters(value)
    if bad:
        raise ValueError(f"control characters ({', '.join(bad)}) are not allowed in an environment value")
    return value


def _check_argv_text(value: str) -> str:
    # It becomes a command-line argument or a path: NUL cannot be in either, and other
    # control characters only hide what the command really is.
    bad = _control_characters(value)
    if bad:
        raise ValueError(f"control characters ({', '.join(bad)}) are not allowed here: this value "
                         "becomes a command-line argument or a path")
    return value


def _check_absolute_path(value: str) -> str:
    _check_argv_text(value)
    if value and not value.startswith("/"):
        raise ValueError(f"{value!r} is not an absolute path (it must not depend on where envmgr runs)")
    if "?" in value or "#" in value:
        raise ValueError(f"{value!r}: '?' and '#' are not allowed in this path (it becomes part of a URL)")
    return value


def _check_image_argument(value: str) -> str:
    # The image's Dockerfile writes it into a RUN or COPY argument, where the builder would read
    # a '$' as a variable (the renderer refuses one: validation says so first, at the field).
    if "$" in value:
        raise ValueError(f"{value!r}: '$' is not allowed here: the image's Dockerfile would read it as a "
                         "variable (write the path itself, without variables)")
    return value


Name = Annotated[str, StringConstraints(pattern=NAME_RE)]
Specifier = Annotated[str, AfterValidator(_check_specifier)]
Arch = Annotated[str, StringConstraints(pattern=ARCH_RE)]
PackageName = Annotated[str, StringConstraints(pattern=PACKAGE_RE)]
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME_RE)]
FlagName = Annotated[str, StringConstraints(pattern=FLAG_RE)]
ToolkitVersion = Annotated[str, StringConstraints(pattern=TOOLKIT_VERSION_RE), AfterValidator(_check_toolkit_size)]
ArgvText = Annotated[str, AfterValidator(_check_argv_text)]
AbsolutePath = Annotated[str, AfterValidator(_check_absolute_path)]
# A path an image's build runs (the base image's interpreter)
ImageCommandPath = Annotated[AbsolutePath, AfterValidator(_check_image_argument)]
FiniteFloat = Annotated[float, AllowInfNan(False)]


def _check_flag_number(value: Any) -> Any:
    # before the union: a float would take a whole number an int may not (rounded)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FLAG_NUMBER:
        raise ValueError(f"a whole number of {len(str(abs(value)))} digits: no server option takes one beyond "
                         f"64 bits (at most ±{MAX_FLAG_NUMBER:,}); write the value the option takes")
    return value


# A flag's value: true = bare flag, false/null = absent (lets an overlay drop a common flag).
FlagValue = Annotated[Union[bool, int, FiniteFloat, ArgvText, None], BeforeValidator(_check_flag_number)]
EnvValue = Union[Annotated[str, AfterValidator(_check_env_text)], int, float, bool]


class Metadata(Model):
    name: Name = Field(description="Short name of the environment, e.g. cuda13")
    description: str = ""
    version: str = Field("1", description="Revision of this spec, for humans")


class Gpu(Model):
    arch: Arch = Field(description="Target compute arch, e.g. sm_120 (12.0); a/f suffixes allowed")
    count: int = Field(1, ge=1, le=1024, strict=True, description="GPUs per host")
    model: str = Field("", description="Marketing name, e.g. 'RTX PRO 6000 Blackwell'")
    segment: Literal["datacenter", "workstation", "geforce", "embedded"] = Field(
        "datacenter", description="Product segment; forward compatibility depends on it"
    )
    memory_gb: FiniteFloat | None = Field(None, gt=0, strict=True, description="Memory per GPU, GB")


class Hardware(Model):
    gpu: Gpu
    interconnect: Literal["pcie", "nvlink"] = "pcie"


class Driver(Model):
    version: Specifier = Field(description="Exact driver version ('580.95.05') or specifier ('>=580,<581')")
    forward_compat: bool = Field(
        False, description="Use cuda-compat (forward compatibility) instead of a new enough driver"
    )
    kernel_modules: Literal["open", "proprietary"] = Field(
        "open", description="NVIDIA's open kernel modules (nvidia-open; the only ones Blackwell supports) "
                            "or the proprietary ones (cuda-drivers)"
    )


class Toolkit(Model):
    version: ToolkitVersion = Field(description="CUDA toolkit version, e.g. '12.8' or '13.0.2'")
    source: Literal["apt", "pip", "runfile", "image"] = Field(
        "apt", description="apt: NVIDIA's repository; pip: nvidia-* wheels; image: the base image has it"
    )
    prefix: AbsolutePath = Field("", description="Install prefix; default /usr/local/cuda-X.Y")


class Cuda(Model):
    toolkits: list[Toolkit] = Field(min_length=1, max_length=MAX_TOOLKITS, description="Toolkits that live side by side")
    select: ToolkitVersion | None = Field(
        None, description="The toolkit /usr/local/cuda and CUDA_HOME point to (default: the last)"
    )

    @model_validator(mode="after")
    def _select_is_listed(self) -> "Cuda":
        versions = [t.version for t in self.toolkits]
        if len(set(versions)) != len(versions):
            raise ValueError(f"toolkits: toolkit versions repeat: {versions}")
        if self.select is not None and self.select not in versions:
            raise ValueError(f"select: {self.select!r} is not one of the toolkits {versions}")
        return self

    @property
    def selected(self) -> Toolkit:
        wanted = self.select or self.toolkits[-1].version
        return next(t for t in self.toolkits if t.version == wanted)


def _check_index_url(value: str) -> str:
    """An index URL is recorded in the generation, shown in plans and written into a
    Dockerfile: no credentials (they would show there) and nothing a shell or a builder reads."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL with a host (like https://pypi.example/simple)")
    if parts.username is not None or parts.password is not None:
        raise ValueError("credentials in an index URL would be recorded in the generation and shown in "
                         "plans: give them to uv and pip outside the spec (UV_INDEX_URL / PIP_INDEX_URL "
                         "in the environment of envmgr, or ~/.netrc)")
    bad = sorted({c for c in value if c in _URL_UNSAFE or ord(c) < 33 or ord(c) > 126})
    if bad:
        raise ValueError(f"{value!r}: the characters {bad} are not allowed in an index URL "
                         "(write them percent-encoded, e.g. %24 for $)")
    return value


# '$' is substituted by Docker's builder and shells; quotes, backslashes and backticks are
# shell syntax: none belongs in an index URL written unencoded.
_URL_UNSAFE = frozenset("$`\\\"'<>{}|^")

IndexUrl = Annotated[str, AfterValidator(_check_index_url)]


class WheelSources(Model):
    find_links: list[Annotated[str, AfterValidator(_check_argv_text), StringConstraints(min_length=1)]] = Field(
        default_factory=list, max_length=16,
        description="Local directories of wheels, searched before any index (relative to the spec file "
                    "that names them)")
    index_url: IndexUrl | None = Field(
        None, description="The index that replaces PyPI, e.g. an internal mirror (no credentials in it)")
    extra_index_urls: list[IndexUrl] = Field(default_factory=list, max_length=16,
                                             description="Indexes searched beside the main one")
    offline: bool = Field(False, description="Reach no network: resolve and install from find_links only")

    @model_validator(mode="after")
    def _offline_has_wheels(self) -> "WheelSources":
        if self.offline and (self.index_url or self.extra_index_urls):
            raise ValueError("offline: an offline install reaches no index; remove index_url and "
                             "extra_index_urls, or set offline: false")
        if self.offline and not self.find_links:
            raise ValueError("offline: an offline install needs find_links: the directories its wheels are in")
        return self


class Inherit(Model):
    python: ImageCommandPath = Field(
        "", description="The base interpreter whose packages the environment sees (default: the "
                        "interpreter the venv is made from; in an image, the base image's python3)")
    packages: list[PackageName] = Field(
        default_factory=list, max_length=MAX_PACKAGES,
        description="Kept from the base at python.packages' exact pins, with what they depend on "
                    "there: checked before the build, never downloaded or installed")


class Python(Model):
    version: Annotated[str, StringConstraints(pattern=r"^3\.[0-9]{1,2}$")] = Field(
        "3.12", description="Interpreter version, e.g. '3.12'"
    )
    torch_cuda: Annotated[str, StringConstraints(pattern=CUDA_TAG_RE)] | None = Field(
        None, description="The torch CUDA tag, e.g. cu128 or cu130"
    )
    index_url: IndexUrl | None = Field(
        None, description="Extra index for torch wheels (default: the PyTorch index of torch_cuda)"
    )
    packages: dict[PackageName, Specifier] = Field(
        default_factory=dict, max_length=MAX_PACKAGES, description="name: exact pin ('2.9.1') or PEP 440 specifier"
    )
    sources: WheelSources = Field(WheelSources(), description="Where wheels come from (default: PyPI)")
    inherit: Inherit | None = Field(
        None, description="Packages kept from a base interpreter (an NGC image's torch) instead of installed")
    no_deps: bool = Field(False, description="The lock is exactly python.packages: no dependency is "
                                             "resolved (a curated wheel directory, inherited packages)")

    @model_validator(mode="after")
    def _inherited_are_pinned(self) -> "Python":
        pins = self.canonical_packages
        for name in self.inherit.packages if self.inherit else ():
            pin = pins.get(canonical_name(name))
            if pin is None:
                raise ValueError(f"inherit.packages: {name} is not in python.packages: pin the version the "
                                 f"base must have (python.packages.{name}: \"X.Y.Z\")")
            if exact_pin(pin) is None:
                raise ValueError(f"inherit.packages: {name} is pinned {pin!r}: an inherited package needs an "
                                 "exact pin (==X.Y.Z), the version the base interpreter must have")
        return self

    @property
    def inherited(self) -> dict[str, str]:
        """``{canonical name: exact version}`` of the packages kept from the base interpreter."""
        pins = self.canonical_packages
        return {canonical_name(n): exact_pin(pins[canonical_name(n)]) or ""
                for n in (self.inherit.packages if self.inherit else ())}

    @property
    def installed_packages(self) -> dict[str, str]:
        """The pins the environment installs itself: every package but the inherited ones."""
        inherited = self.inherited
        return {name: spec for name, spec in self.packages.items() if canonical_name(name) not in inherited}

    @property
    def canonical_packages(self) -> dict[str, str]:
        """The packages by their PEP 503 names (``Zope.Interface`` -> ``zope-interface``)."""
        return {canonical_name(name): spec for name, spec in self.packages.items()}

    @property
    def torch_index_url(self) -> str | None:
        """The index torch is downloaded from, or None where no torch is downloaded (none
        pinned, inherited, or offline)."""
        if "torch" not in {canonical_name(n) for n in self.installed_packages} or self.sources.offline:
            return None
        if self.index_url:
            return self.index_url
        return f"https://download.pytorch.org/whl/{self.torch_cuda}" if self.torch_cuda else None


class VenvOptions(Model):
    path: AbsolutePath = Field("", description="Where generations of the venv live (default: envmgr state dir)")


class DockerOptions(Model):
    base_image: Annotated[str, StringConstraints(pattern=IMAGE_REF_RE, max_length=255)] | Literal[""] = Field(
        "", description="Base image, e.g. nvidia/cuda:13.0.2-devel-ubuntu24.04")
    tag: Annotated[str, StringConstraints(pattern=REPOSITORY_RE, max_length=255)] | Literal[""] = Field(
        "", description="Image repository name (tag is the spec's content hash)")
    wheelhouse: bool = Field(False, description="Download wheels on the host, install offline")


class AnsibleOptions(Model):
    inventory: ArgvText = Field("", description="Inventory file (relative to the spec)")
    group: Annotated[str, StringConstraints(pattern=GROUP_RE)] = Field("all", description="Host group to provision")
    serial: Annotated[int, Field(strict=True, ge=1)] | Annotated[str, StringConstraints(pattern=r"^[0-9]{1,3}%$")] = Field(
        1, description="Hosts per batch (number or percentage like '25%')")
    max_fail_percentage: int = Field(0, ge=0, le=100, strict=True, description="Stop the rollout above this")


def _check_backend(value: str) -> str:
    known = backends.schemes()
    if value not in known:
        close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
        raise ValueError(f"{value!r} is no backend envmgr knows: one of {', '.join(known)}"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    return value


# a scheme of envmgr.backends (the one list): checked against it, listed in the JSON Schema
BackendName = Annotated[str, AfterValidator(_check_backend),
                        WithJsonSchema({"type": "string", "enum": list(backends.schemes())})]


class Realize(Model):
    backend: BackendName = "venv"
    venv: VenvOptions = VenvOptions()
    docker: DockerOptions = DockerOptions()
    ansible: AnsibleOptions = AnsibleOptions()


class Probes(Model):
    required: list[Name] = Field(default_factory=list, max_length=MAX_PROBES, description="Must pass before switching")
    expected_fail: list[Name] = Field(default_factory=list, max_length=MAX_PROBES, description="Known not to work here")

    @model_validator(mode="after")
    def _disjoint(self) -> "Probes":
        both = sorted(set(self.required) & set(self.expected_fail))
        if both:
            raise ValueError(f"expected_fail: probes both required and expected to fail: {both}")
        return self


class BenchConfig(Model):
    description: str = ""
    flags: dict[FlagName, FlagValue] = Field(
        default_factory=dict, max_length=MAX_FLAGS, description="Overlay on the common flags; false/null removes one"
    )
    env: dict[EnvName, EnvValue | None] = Field(default_factory=dict, max_length=MAX_ENV)


class Load(Model):
    dataset: Literal["random-ids", "random", "sharegpt"] = "random-ids"
    dataset_path: ArgvText = ""
    input_len: int = Field(1024, ge=1, strict=True)
    output_len: int = Field(512, ge=1, strict=True)
    num_prompts: int = Field(64, ge=1, strict=True)
    max_concurrency: int = Field(8, ge=1, strict=True)
    timeout_s: FiniteFloat = Field(3600, gt=0, description="Longest the load may run")
    repeats: int = Field(3, ge=1, le=20, strict=True,
                         description="Measured runs per cell: the report shows their median and spread")
    warmup: bool = Field(True, description="One run first, not counted (caches, CUDA graphs, JIT)")


class Benchmarks(Model):
    model_path: ArgvText = Field(description="Local model directory (no downloads)")
    server_flags: dict[FlagName, FlagValue] = Field(default_factory=dict, max_length=MAX_FLAGS)
    configs: dict[Name, BenchConfig] = Field(default_factory=dict, max_length=MAX_CONFIGS)
    load: Load = Load()
    # A 600 GB model takes ~10 minutes to load: the limits are generous; a crash is caught
    # in seconds by its log or its exit, not by these.
    startup_timeout_s: FiniteFloat = Field(1800, gt=0, description="Longest a server may take to get ready")
    stall_timeout_s: FiniteFloat = Field(600, gt=0, description="Not ready and silent this long: hung")

    def flags_of(self, config: str) -> dict[str, FlagValue]:
        """Common flags with the config's overlay; false/null drop a flag."""
        merged = {**self.server_flags, **self.configs[config].flags}
        return {k: v for k, v in merged.items() if v is not None and v is not False}


class Spec(Model):
    """One environment: hardware it targets, the stack, how to realize, probe and bench it."""

    apiVersion: Literal["envmgr/v1"] = Field(description="Spec format version")
    extends: str | None = Field(None, description="Parent spec file, relative to this one")
    kind: Literal["Environment"] = "Environment"
    metadata: Metadata
    hardware: Hardware
    driver: Driver | None = None
    cuda: Cuda | None = None
    python: Python = Python()
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, max_length=MAX_ENV)
    secrets: dict[EnvName, bool] = Field(
        default_factory=dict, max_length=MAX_ENV,
        description="Env names whose values never show (true), or that only look secret (false); "
                    "*_TOKEN, *_KEY, *_SECRET and *PASSWORD* are secret without it")
    realize: Realize = Realize()
    probes: Probes = Probes()
    benchmarks: Benchmarks | None = None


def canonical_name(package: str) -> str:
    """PEP 503 normalised name without extras: ``Flashinfer_Python[x]`` -> ``flashinfer-python``."""
    return re.sub(r"[-_.]+", "-", package.split("[", 1)[0]).lower()

