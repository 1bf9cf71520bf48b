"""What it takes to go from what a target has to what a spec asks for.

``plan(current, spec)`` compares a ``State`` (observed facts of a target, or another
spec standing for an environment already realized) with a spec and returns ordered,
typed actions, each with its reason. An empty plan means nothing to change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envmgr.compat.kb import default_knowledge_base
from envmgr.secrets import REDACTED, Redactor, secret_names
from envmgr.spec.models import Spec
from envmgr.versions import exact_pin, local_cuda_tag, lowest_version, release

if TYPE_CHECKING:  # facts pull in their collectors; validate needs only the type
    from envmgr.facts.model import Facts

CUDA_LINK = "/usr/local/cuda"

# Order in which a plan applies actions: what needs a reboot first, the Python layer last.
KIND_ORDER = (
    "driver.install", "driver.upgrade", "driver.downgrade", "driver.change",
    "toolkit.add", "toolkit.select", "python.create",
    "package.remove", "package.inherit", "package.install", "package.upgrade", "package.downgrade",
    "package.change", "package.rebuild", "env.set", "env.change", "env.unset",
)


@dataclass(frozen=True)
class State:
    """An environment as plan compares it. From facts, versions are exact; from a spec
    (``managed``), they are specifiers and whatever the spec omits would be removed."""

    label: str
    driver: str | None = None
    toolkits: tuple[tuple[str, str], ...] = ()  # (version, "system" | "pip")
    selected_toolkit: str | None = None
    python: str | None = None
    torch_cuda: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    managed: bool = False


@dataclass(frozen=True)
class Action:
    kind: str
    target: str
    before: str | None
    after: str | None
    reason: str
    reboot: bool = False
    # "host": the host's own (a driver, a system toolkit): only a fleet rollout changes it; a venv
    # or an image has it as a prerequisite, checked rather than done
    scope: str = "environment"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        if self.before and self.after:
            return f"{self.target}: {self.before} -> {self.after}"
        return f"{self.target}: {self.after or self.before or ''}".rstrip(": ")


def state_from_facts(facts: Facts, label: str = "local://") -> State:
    # The toolkit in use: CUDA_HOME's when set (pip toolkits are selected that way),
    # else the target of /usr/local/cuda.
    in_use = (facts.env.get("CUDA_HOME") or facts.cuda_link or "").rstrip("/")
    if in_use == CUDA_LINK and facts.cuda_link:  # CUDA_HOME=/usr/local/cuda (NGC images): the link's target
        in_use = facts.cuda_link.rstrip("/")
    linked = next((t.version for t in facts.toolkits if in_use and t.path.rstrip("/") == in_use), None)
    py = facts.python
    torch = py.packages.get("torch") if py else None
    return State(
        label=label,
        driver=facts.driver_version,
        toolkits=tuple((t.version, t.source) for t in facts.toolkits if t.version),
        selected_toolkit=linked,
        python=py.version if py else None,
        torch_cuda=local_cuda_tag(torch),
        packages=dict(py.packages) if py else {},
        env=dict(facts.env),
    )


def state_from_spec(spec: Spec, label: str | None = None) -> State:
    return State(
        label=label or f"spec {spec.metadata.name}",
        driver=spec.driver.version if spec.driver else None,
        toolkits=tuple((t.version, _toolkit_kind(t.source)) for t in spec.cuda.toolkits)
        if spec.cuda else (),
        selected_toolkit=spec.cuda.selected.version if spec.cuda else None,
        python=spec.python.version,
        torch_cuda=spec.python.torch_cuda,
        packages=spec.python.canonical_packages,
        env={k: str(v) for k, v in spec.env.items()},
        managed=True,
    )


def plan(current: State, spec: Spec) -> list[Action]:
    """Ordered actions that turn ``current`` into ``spec``; empty when nothing changes."""
    actions = [
        *_driver(current, spec),
        *_toolkits(current, spec),
        *_python(current, spec),
        *_packages(current, spec),
        *_env(current, spec),
    ]
    return sorted(actions, key=lambda a: (KIND_ORDER.index(a.kind), a.target))


# --- pieces ---------------------------------------------------------------------------

def _direction(before: str | None, after: str | None) -> str:
    """upgrade / downgrade / change, comparing the lowest versions each side allows."""
    a = lowest_version(before) if before and _is_specifier(before) else before
    b = lowest_version(after) if after and _is_specifier(after) else after
    try:
        if a and b and Version(a) != Version(b):
            return "upgrade" if Version(b) > Version(a) else "downgrade"
    except ValueError:  # InvalidVersion, and int() of a release number over 4300 digits (facts)
        pass
    return "change"


def _is_specifier(text: str) -> bool:
    return text[:1] in "<>=!~"


def _satisfied(have: str | None, want: str, managed: bool) -> bool:
    """Does what the target has already meet what the spec wants?"""
    if have is None:
        return False
    if managed:  # both are specifiers: equal text means no change
        return SpecifierSet(have) == SpecifierSet(want)
    try:
        return SpecifierSet(want).contains(Version(have), prereleases=True)
    except ValueError:  # InvalidVersion, and a 5000-digit version read from recorded facts
        return False


def _driver(current: State, spec: Spec) -> list[Action]:
    if spec.driver is None or _satisfied(current.driver, spec.driver.version, current.managed):
        return []
    want = spec.driver.version
    kind = "install" if current.driver is None else _direction(current.driver, want)
    cuda = spec.cuda.selected.version if spec.cuda else None
    tables = default_knowledge_base().tables
    minimum = tables["cuda_driver_min"].get(cuda.split(".")[0]) if cuda else None
    why = f"CUDA {cuda} needs driver >= {minimum}; " if minimum else ""
    return [Action(f"driver.{kind}", "nvidia-driver", current.driver, want,
                   f"{why}the kernel module changes: reboot (or reload the module) before use",
                   reboot=True, scope="host")]


def _toolkits(current: State, spec: Spec) -> list[Action]:
    if spec.cuda is None:
        return []
    have = {(release(v), kind) for v, kind in current.toolkits}
    actions = []
    kept = ", ".join(sorted(v if k == "system" else f"{v} (pip)" for v, k in have)) or "none"
    for tk in spec.cuda.toolkits:
        if (release(tk.version), _toolkit_kind(tk.source)) not in have:
            where = ("from nvidia-* wheels inside the environment" if tk.source == "pip" else
                     f"under {tk.prefix or '/usr/local/cuda-' + release(tk.version)} from {tk.source}")
            actions.append(Action("toolkit.add", f"cuda-{tk.version}", None, tk.version,
                                  f"side by side {where} (present now: {kept})",
                                  scope="environment" if tk.source == "pip" else "host"))
    selected = spec.cuda.selected
    before = current.selected_toolkit
    if before is None or release(before) != release(selected.version):
        link = "CUDA_HOME" if selected.source == "pip" else CUDA_LINK
        actions.append(Action("toolkit.select", link, before, selected.version,
                              "CUDA_HOME, nvcc on PATH and FlashInfer's JIT follow it",
                              scope="environment" if selected.source == "pip" else "host"))
    return actions


def _toolkit_kind(source: str) -> str:
    """A pip toolkit lives in the Python environment; the others on the system."""
    return "pip" if source == "pip" else "system"


def _python(current: State, spec: Spec) -> list[Action]:
    want = spec.python.version
    if current.python and release(current.python) == want:
        return []
    return [Action("python.create", "python", current.python, want,
                   "a new interpreter means a new environment: every package is installed again")]


def _packages(current: State, spec: Spec) -> list[Action]:
    want = spec.python.canonical_packages
    reasons = _pin_reasons(spec)
    inherited = spec.python.inherited
    base = spec.python.inherit.python if spec.python.inherit and spec.python.inherit.python else "the base interpreter"
    actions = []
    for name, specifier in want.items():
        have = current.packages.get(name)
        reason = reasons.get(name, "")
        if name in inherited:
            if have is None or not _satisfied(have, specifier, current.managed):
                actions.append(Action("package.inherit", name, have, specifier,
                                      f"kept from {base} (python.inherit): its version is checked "
                                      "before the build, nothing is installed"))
            continue
        if have is None:
            actions.append(Action("package.install", name, None, specifier, reason or "new in the spec"))
        elif not _satisfied(have, specifier, current.managed):
            kind = _direction(have, specifier)
            if name == "torch" and spec.python.torch_cuda and current.torch_cuda \
                    and spec.python.torch_cuda != current.torch_cuda:
                reason = f"{reason or 'spec pin'}; build {current.torch_cuda} -> {spec.python.torch_cuda}"
            actions.append(Action(f"package.{kind}", name, have, specifier, reason or "spec pin"))
        elif name == "torch" and spec.python.torch_cuda and current.torch_cuda \
                and spec.python.torch_cuda != current.torch_cuda:
            actions.append(Action("package.rebuild", name, current.torch_cuda,
                                  spec.python.torch_cuda, "same version, other CUDA build"))
    if current.managed:
        for name in sorted(set(current.packages) - set(want)):
            actions.append(Action("package.remove", name, current.packages[name], None,
                                  reasons.get(name, "no longer in the spec")))
    return actions


def _pin_reasons(spec: Spec) -> dict[str, str]:
    """Why the stack packages move: the pins of the spec's sglang release."""
    sglang = exact_pin(spec.python.packages.get("sglang"))
    pins = default_knowledge_base().tables["sglang_pins"].get(sglang or "")
    if not pins:
        return {}
    why = f"sglang {sglang} pins"
    reasons = {
        "torch": f"{why} torch {pins['torch']}",
        "flashinfer-python": f"{why} flashinfer-python {pins['flashinfer']}",
        "flashinfer-cubin": f"must equal flashinfer-python ({why} {pins['flashinfer']})",
        pins["kernel_package"]: f"{why} {pins['kernel_package']} {pins['kernel']}",
    }
    other = "sgl-kernel" if pins["kernel_package"] == "sglang-kernel" else "sglang-kernel"
    reasons[other] = f"replaced by {pins['kernel_package']} for sglang {sglang}"
    return reasons


def _env(current: State, spec: Spec) -> list[Action]:
    want = {k: str(v) for k, v in spec.env.items()}
    secret = secret_names(spec)
    # by name, and wherever another value holds a secret's (URL: https://u:TOKEN@host), old or new
    redact = Redactor(secret, [env[n] for env in (want, current.env) for n in secret if n in env])

    def shown(name: str, value: str | None) -> str | None:
        return REDACTED if value == REDACTED else redact.value(name, value)

    actions = []
    for name, value in want.items():
        have = current.env.get(name)
        if have is None:
            actions.append(Action("env.set", name, None, shown(name, value), "set by the spec"))
        elif have == REDACTED:
            continue  # a recorded generation never keeps a secret: envmgr cannot tell it changed
        elif have != value:
            actions.append(Action("env.change", name, shown(name, have), shown(name, value), "set by the spec"))
    if current.managed:
        for name in sorted(set(current.env) - set(want)):
            actions.append(Action("env.unset", name, shown(name, current.env[name]), None, "no longer in the spec"))
    return actions


def split_for_builder(actions: list[Action], changes_host: bool) -> tuple[list[Action], list[Action]]:
    """(steps the builder executes, host prerequisites it needs but never does itself): a builder
    that changes hosts (``Builder.changes_host``) does them all; a venv or an image builds only
    an environment."""
    if changes_host:
        return list(actions), []
    return [a for a in actions if a.scope != "host"], [a for a in actions if a.scope == "host"]
