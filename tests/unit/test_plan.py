"""The planner: facts or a realized spec vs a spec -> ordered, typed actions."""

from __future__ import annotations

from pathlib import Path

from envmgr.facts.model import Facts, PythonFact, ToolkitFact
from envmgr.plan import KIND_ORDER, plan, state_from_facts, state_from_spec
from envmgr.spec import Spec, deep_merge, load_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"

BASE = {
    "apiVersion": "envmgr/v1",
    "metadata": {"name": "p"},
    "hardware": {"gpu": {"arch": "sm_90"}},
    "driver": {"version": "580.95.05"},
    "cuda": {"toolkits": [{"version": "13.0"}]},
    "python": {"version": "3.12", "torch_cuda": "cu130", "packages": {"torch": "2.11.0", "numpy": ">=1.26"}},
    "env": {"CUDA_HOME": "/usr/local/cuda-13.0"},
}


def spec(overlay: dict | None = None) -> Spec:
    return Spec.model_validate(deep_merge(BASE, overlay or {}))


def host(**kw) -> Facts:
    """Facts of a host that already matches BASE, with overrides."""
    values = dict(
        driver_version="580.95.05",
        toolkits=[ToolkitFact(path="/usr/local/cuda-13.0", version="13.0.2")],
        cuda_link="/usr/local/cuda-13.0",
        python=PythonFact(executable="/usr/bin/python3", version="3.12.3",
                          packages={"torch": "2.11.0+cu130", "numpy": "2.1.0", "pip": "24.0"}),
        env={"CUDA_HOME": "/usr/local/cuda-13.0"},
    )
    values.update(kw)
    return Facts(**values)


def kinds(actions):
    return [(a.kind, a.target) for a in actions]


def test_host_that_matches_needs_no_change():
    assert plan(state_from_facts(host()), spec()) == []


def test_same_spec_needs_no_change():
    s = spec()
    assert plan(state_from_spec(s), s) == []


def test_unmanaged_host_packages_are_not_removed():
    # pip is on the host but not in the spec: a host is not ours to prune
    assert not [a for a in plan(state_from_facts(host()), spec()) if a.kind == "package.remove"]


def test_driver_upgrade_needs_reboot_and_comes_first():
    actions = plan(state_from_facts(host(driver_version="570.124.06")),
                   spec({"python": {"packages": {"numpy": "2.2.0"}}}))
    assert actions[0].kind == "driver.upgrade"
    assert actions[0].reboot
    assert actions[0].before == "570.124.06"
    assert "CUDA 13.0 needs driver >= 580" in actions[0].reason


def test_driver_specifier_satisfied_by_observed_version():
    assert plan(state_from_facts(host(driver_version="590.44.01")), spec({"driver": {"version": ">=580"}})) == []


def test_fresh_host_installs_everything_in_order():
    actions = plan(state_from_facts(Facts()), spec())
    assert kinds(actions) == [
        ("driver.install", "nvidia-driver"),
        ("toolkit.add", "cuda-13.0"),
        ("toolkit.select", "/usr/local/cuda"),
        ("python.create", "python"),
        ("package.install", "numpy"),
        ("package.install", "torch"),
        ("env.set", "CUDA_HOME"),
    ]
    order = [KIND_ORDER.index(a.kind) for a in actions]
    assert order == sorted(order)


def test_toolkit_added_beside_and_link_switched():
    actions = plan(state_from_facts(host(
        toolkits=[ToolkitFact(path="/usr/local/cuda-12.8", version="12.8.1")],
        cuda_link="/usr/local/cuda-12.8", env={})), spec())
    add = next(a for a in actions if a.kind == "toolkit.add")
    assert "side by side" in add.reason and "12.8" in add.reason
    select = next(a for a in actions if a.kind == "toolkit.select")
    assert (select.before, select.after) == ("12.8.1", "13.0")


def test_package_directions():
    current = state_from_facts(host(python=PythonFact(
        executable="python3", version="3.12.1",
        packages={"torch": "2.12.0+cu130", "numpy": "1.0.0"})))
    actions = {a.target: a.kind for a in plan(current, spec())}
    assert actions == {"torch": "package.downgrade", "numpy": "package.upgrade"}
    # a range with no lower bound gives no direction
    actions = {a.target: a.kind for a in plan(current, spec({"python": {"packages": {"numpy": "<1.0"}}}))}
    assert actions["numpy"] == "package.change"


def test_torch_rebuild_for_other_cuda_tag():
    current = state_from_facts(host(python=PythonFact(
        executable="python3", version="3.12.1", packages={"torch": "2.11.0+cu128", "numpy": "2.0"})))
    (action,) = plan(current, spec())
    assert (action.kind, action.before, action.after) == ("package.rebuild", "cu128", "cu130")


def test_new_python_version_creates_a_new_environment():
    actions = plan(state_from_facts(host()), spec({"python": {"version": "3.13"}}))
    assert kinds(actions)[0] == ("python.create", "python")


def test_env_changes():
    actions = plan(state_from_facts(host(env={"CUDA_HOME": "/usr/local/cuda-12.8"})),
                   spec({"env": {"NCCL_P2P_DISABLE": "1"}}))
    assert kinds(actions) == [
        ("toolkit.select", "/usr/local/cuda"),  # CUDA_HOME points at no toolkit of the host
        ("env.set", "NCCL_P2P_DISABLE"),
        ("env.change", "CUDA_HOME"),
    ]


def test_pip_toolkit_selected_through_cuda_home():
    nvcc_prefix = "/venv/lib/python3.12/site-packages/nvidia/cu13"
    facts = host(toolkits=[ToolkitFact(path=nvcc_prefix, version="13.0.88", source="pip")],
                 cuda_link=None, env={"CUDA_HOME": nvcc_prefix})
    pip_spec = spec({"cuda": {"toolkits": [{"version": "13.0", "source": "pip"}]},
                     "env": {"CUDA_HOME": nvcc_prefix}})
    assert plan(state_from_facts(facts), pip_spec) == []
    # the same wheel does not count as an apt toolkit on the system
    assert ("toolkit.add", "cuda-13.0") in kinds(plan(state_from_facts(facts), spec({"env": {"CUDA_HOME": nvcc_prefix}})))


def test_spec_to_spec_removes_what_the_new_spec_drops():
    before = spec({"env": {"OLD": "1"}, "python": {"packages": {"six": "1.16.0"}}})
    actions = plan(state_from_spec(before), spec())
    assert ("package.remove", "six") in kinds(actions)
    assert ("env.unset", "OLD") in kinds(actions)


def test_scenario_upgrade_reads_like_a_review():
    old = load_spec(SPECS / "cuda128.yaml").spec
    new = load_spec(SPECS / "cuda13.yaml").spec
    actions = plan(state_from_spec(old), new)
    by_target = {a.target: a for a in actions}
    assert by_target["nvidia-driver"].kind == "driver.upgrade" and by_target["nvidia-driver"].reboot
    assert by_target["cuda-13.0"].kind == "toolkit.add"
    assert "cuda-12.8" not in by_target  # kept side by side, not reinstalled
    assert by_target["/usr/local/cuda"].after == "13.0"
    assert by_target["torch"].kind == "package.upgrade"
    assert "sglang 0.5.15 pins torch 2.11.0" in by_target["torch"].reason
    assert "cu128 -> cu130" in by_target["torch"].reason
    assert by_target["sgl-kernel"].kind == "package.remove"
    assert "replaced by sglang-kernel" in by_target["sgl-kernel"].reason
    assert by_target["sglang-kernel"].kind == "package.install"
    assert plan(state_from_spec(new), new) == []
