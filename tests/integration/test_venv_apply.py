"""apply / status / rollback with the venv backend, for real (uv, PyPI, subprocesses).

Every apply runs the installed CLI in a subprocess, as an operator would; crash tests
kill it with SIGKILL at each failpoint (envmgr.failpoints) and check that the previous
generation is still current and usable, and that the next apply succeeds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envmgr.failpoints import POINTS
from envmgr.state import Store

pytestmark = pytest.mark.integration

PAYLOAD = "hello $(touch {pwned}) `id`; rm -rf / && echo \"quoted\" 'single'"


def write_spec(path: Path, six: str = "1.16.0", extra_env: str = "") -> Path:
    pwned = path.parent / "pwned"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: envmgr/v1
        metadata: {{name: small}}
        hardware: {{gpu: {{arch: sm_90}}}}
        python:
          version: "{sys.version_info.major}.{sys.version_info.minor}"
          packages: {{packaging: "24.2", six: "{six}"}}
        env:
          GREETING: {json.dumps(PAYLOAD.format(pwned=pwned))}
        {extra_env}"""))
    return path


def envmgr(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envmgr", *args, "--home", str(home)],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False)


def venv_python(gen_path: Path) -> str:
    return str(gen_path / "venv" / "bin" / "python")


def installed(gen_path: Path, name: str) -> str:
    out = subprocess.run([venv_python(gen_path), "-c",
                          f"import importlib.metadata as m; print(m.version({name!r}))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "state"


def test_apply_unchanged_change_drift_rollback(tmp_path: Path, home: Path):
    spec = write_spec(tmp_path / "small.yaml")
    first = envmgr(home, "apply", str(spec), "--yes")
    assert first.returncode == 0, first.stderr
    assert "applied: generation 1" in first.stdout
    assert "package.install  six  1.16.0" in first.stderr  # the plan was shown
    store = Store(home)
    gen1 = store.current()
    assert gen1 is not None and gen1.number == 1
    assert installed(gen1.path, "six") == "1.16.0"
    assert "six==1.16.0" in gen1.lock and "--hash=sha256:" in gen1.lock
    assert {"spec.yaml", "plan.json", "lock.txt", "meta.json", "logs"} <= {p.name for p in gen1.path.iterdir()}

    # the payload is a literal value in the environment, never run
    from envmgr.targets.venv import VenvTarget

    with VenvTarget(str(gen1.path / "venv")) as venv:
        result = venv.run(["python", "-c", "import os; print(os.environ['GREETING'])"])
    assert result.stdout.strip() == PAYLOAD.format(pwned=tmp_path / "pwned")
    assert not (tmp_path / "pwned").exists()

    again = envmgr(home, "apply", str(spec), "--yes")
    assert again.returncode == 0 and "unchanged: generation 1" in again.stdout
    assert [g.number for g in store.generations()] == [1]

    write_spec(spec, six="1.17.0")
    second = envmgr(home, "apply", str(spec), "--yes")
    assert second.returncode == 0, second.stderr
    assert "package.upgrade  six  1.16.0 -> 1.17.0" in second.stderr
    gen2 = store.current()
    assert gen2.number == 2 and installed(gen2.path, "six") == "1.17.0"
    assert installed(gen1.path, "six") == "1.16.0"  # the previous generation is untouched

    status = envmgr(home, "status")
    assert status.returncode == 0 and "no drift" in status.stdout
    # verify defaults to the current generation: its interpreter, its lock, the env it runs with
    verified = envmgr(home, "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    checks = {r["check"]: r for r in json.loads(verified.stdout)["results"]}
    assert checks["env:GREETING"]["ok"] and checks["package:six"]["ok"]
    assert venv_python(gen2.path) in checks["python:version"]["found"] or checks["python:version"]["ok"]
    # the current generation is what a plan starts from: the spec it was built from has nothing to do
    planned = envmgr(home, "plan", str(spec), "--json")
    assert planned.returncode == 0, planned.stdout
    assert json.loads(planned.stdout)["changes"] == 0 and "generation 2" in json.loads(planned.stdout)["from"]
    write_spec(spec, six="1.16.0")  # and another spec is planned against it, not against the bare host
    against = json.loads(envmgr(home, "plan", str(spec), "--json").stdout)
    assert [a["kind"] for a in against["actions"]] == ["package.downgrade"], against["actions"]
    write_spec(spec, six="1.17.0")
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python",
                    venv_python(gen2.path), "six==1.16.0"], check=True, capture_output=True)
    drifted = envmgr(home, "status", "--json")
    assert drifted.returncode == 2
    assert json.loads(drifted.stdout)["drift"]["changed"] == {"six": {"locked": "1.17.0", "installed": "1.16.0"}}
    assert json.loads(drifted.stdout)["fix"].startswith("`envmgr apply ")  # how to get back to the lock

    repaired = envmgr(home, "apply", str(spec), "--yes")  # drift makes the same spec apply again
    assert repaired.returncode == 0 and "applied: generation 3" in repaired.stdout
    assert envmgr(home, "status").returncode == 0

    back = envmgr(home, "rollback")
    assert back.returncode == 0 and "current -> generation 2" in back.stdout
    assert store.current().number == 2
    assert envmgr(home, "rollback", "--to", "1").returncode == 0
    assert installed(store.current().path, "six") == "1.16.0"
    listing = json.loads(envmgr(home, "generations", "--json").stdout)
    assert [(g["number"], g["current"]) for g in listing] == [(1, True), (2, False), (3, False)]


def test_pip_installer_builds_the_same_lock(tmp_path: Path, home: Path):
    spec = write_spec(tmp_path / "small.yaml")
    done = envmgr(home, "apply", str(spec), "--yes", "--backend", "venv://?installer=pip")
    assert done.returncode == 0, done.stderr
    gen = Store(home).current()
    assert installed(gen.path, "packaging") == "24.2"
    assert "[pip]" in (gen.path / "logs" / "apply.log").read_text()


def test_second_apply_waits_for_none(tmp_path: Path, home: Path):
    spec = write_spec(tmp_path / "small.yaml")
    with Store(home).locked():
        busy = envmgr(home, "apply", str(spec), "--yes")
    assert busy.returncode == 1
    assert "another envmgr apply (pid " in busy.stderr and " holds " in busy.stderr and "Traceback" not in busy.stderr


def test_apply_without_yes_and_without_terminal_refuses(tmp_path: Path, home: Path):
    spec = write_spec(tmp_path / "small.yaml")
    refused = envmgr(home, "apply", str(spec))
    assert refused.returncode == 1 and "pass --yes" in refused.stderr
    assert Store(home).generations() == []


def test_rollback_refuses_interrupted_and_vanished_generations(tmp_path: Path, home: Path):
    """Issue 12: a plain rollback never makes current a generation that did not pass its gate."""
    spec = write_spec(tmp_path / "small.yaml")
    assert envmgr(home, "apply", str(spec), "--yes").returncode == 0  # 1: six 1.16.0
    write_spec(spec, six="1.17.0")
    killed = envmgr(home, "apply", str(spec), "--yes", env={"ENVMGR_FAILPOINT": "committed"})
    assert killed.returncode == -signal.SIGKILL  # 2: complete, but its gate never ran
    assert envmgr(home, "apply", str(spec), "--yes").returncode == 0  # 3: six 1.17.0, current
    listing = json.loads(envmgr(home, "generations", "--json").stdout)
    assert [(g["number"], g["gate"], g["current"]) for g in listing] == [
        (1, "passed", False), (2, "interrupted", False), (3, "passed", True)]
    assert "gate interrupted" in envmgr(home, "generations").stdout

    back = envmgr(home, "rollback")  # skips 2
    assert back.returncode == 0 and "current -> generation 1" in back.stdout, back.stderr
    refused = envmgr(home, "rollback", "--to", "2")
    assert refused.returncode == 1 and "interrupted before its probe gate" in refused.stderr
    assert "--force" in refused.stderr and Store(home).current().number == 1
    assert envmgr(home, "rollback", "--to", "2", "--force").returncode == 0
    assert Store(home).current().number == 2

    shutil.rmtree(Store(home).get(3).path / "venv")  # its environment deleted by hand
    gone = envmgr(home, "rollback", "--to", "3")
    assert gone.returncode == 1 and "venv" in gone.stderr and "is gone" in gone.stderr


def test_a_secret_is_in_no_output_and_no_recorded_file_but_the_0600_env_file(tmp_path: Path, home: Path):
    """Issue 12: HF_TOKEN reaches the environment, and nothing else envmgr writes or prints."""
    token = "hf_ReAlLySeCrEt0123456789abcdefghi"
    spec = write_spec(tmp_path / "small.yaml")
    spec.write_text(spec.read_text().replace("env:\n", f"env:\n  HF_TOKEN: {token}\n", 1))
    done = envmgr(home, "apply", str(spec), "--yes")
    assert done.returncode == 0, done.stderr
    listed = envmgr(home, "apply", str(spec), "--yes", "--json")
    assert token not in done.stdout + done.stderr + listed.stdout + listed.stderr
    gen = Store(home).current()
    holders = [p for p in gen.path.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    env_file = gen.path / "venv" / "envmgr-env.json"
    assert holders == [env_file]
    assert env_file.stat().st_mode & 0o777 == 0o600
    assert "<redacted>" in (gen.path / "spec.yaml").read_text()
    from envmgr.targets.venv import VenvTarget

    with VenvTarget(str(gen.path / "venv")) as venv:  # the environment has it
        assert venv.run(["python", "-c", "import os; print(os.environ['HF_TOKEN'])"]).stdout.strip() == token


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_mid_install_stops_the_apply_like_ctrl_c(tmp_path: Path, home: Path, signum):
    """Issue 12: SIGTERM/SIGHUP during apply: the installer's processes are killed, the
    previous generation stays current, and the next apply sweeps the half-built one."""
    spec = write_spec(tmp_path / "small.yaml")
    assert envmgr(home, "apply", str(spec), "--yes").returncode == 0
    write_spec(spec, six="1.17.0")
    proc = subprocess.Popen([sys.executable, "-m", "envmgr", "apply", str(spec), "--yes", "--home", str(home)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "ENVMGR_FAILPOINT": "venv-created:wait"})
    assert proc.stderr is not None
    for line in proc.stderr:  # wait until it is mid-apply
        if "failpoint venv-created: waiting" in line:
            break
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum and f"stopped by {signum.name}" in err and "Traceback" not in err
    # it says what it left (issue 17: Ctrl-C during apply used to print nothing)
    assert "interrupted: generation 2 is incomplete" in err and "generation 1 is still current" in err
    store = Store(home)
    assert store.current().number == 1 and installed(store.current().path, "six") == "1.16.0"
    assert envmgr(home, "apply", str(spec), "--yes").returncode == 0
    assert store.current().number == 2 and sorted(p.name for p in store.generations_dir.iterdir()) == ["1", "2"]


def test_a_relative_home_resolves_wherever_it_is_read_from(tmp_path: Path):
    spec = write_spec(tmp_path / "small.yaml")
    done = subprocess.run([sys.executable, "-m", "envmgr", "apply", str(spec), "--yes", "--home", "state"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    elsewhere = envmgr(tmp_path / "state", "status")  # from the test's own directory
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr
    meta = json.loads((tmp_path / "state" / "generations" / "1" / "meta.json").read_text())
    assert meta["location"] == "@generation/venv"  # relative: the home can move
    assert Store(tmp_path / "state").current().location.startswith(str(tmp_path.resolve()))


def test_a_home_that_is_a_file_is_a_clean_error(tmp_path: Path):
    not_a_dir = tmp_path / "home"
    not_a_dir.write_text("")
    result = envmgr(not_a_dir, "generations")
    assert result.returncode == 1 and "is not a directory" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("point", POINTS)
def test_kill_9_at_every_point_keeps_current_usable(tmp_path: Path, home: Path, point: str):
    spec = write_spec(tmp_path / "small.yaml")
    assert envmgr(home, "apply", str(spec), "--yes").returncode == 0
    store = Store(home)
    before = store.current()

    write_spec(spec, six="1.17.0")
    killed = envmgr(home, "apply", str(spec), "--yes", env={"ENVMGR_FAILPOINT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    now = store.current()
    if point == "switched":  # killed after the switch: the new generation is complete and current
        assert now.number == 2 and installed(now.path, "six") == "1.17.0"
    else:
        assert now.number == before.number
        assert installed(now.path, "six") == "1.16.0"  # the previous generation still works
    status = envmgr(home, "status")
    assert status.returncode == 0, status.stdout

    after = envmgr(home, "apply", str(spec), "--yes")
    assert after.returncode == 0, after.stderr
    assert installed(store.current().path, "six") == "1.17.0"
    leftovers = [p.name for p in store.generations_dir.iterdir() if not (p / "meta.json").exists()]
    assert leftovers == []  # the interrupted generation was swept


def test_a_venv_never_plans_the_hosts_driver_it_checks_it(tmp_path: Path, home: Path):
    """A driver the host lacks is a prerequisite a venv cannot meet: refused before any generation."""
    spec = write_spec(tmp_path / "s.yaml", extra_env="")
    spec.write_text(spec.read_text() + 'driver: {version: "==999.1.2"}\nrealize: {backend: venv}\n')
    result = envmgr(home, "apply", str(spec), "--yes")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "builds a Python environment, not the host" in result.stderr
    assert "ansible://" in result.stderr  # what to use instead
    assert not (home / "generations").exists() or not any((home / "generations").iterdir())
    planned = json.loads(envmgr(home, "plan", str(spec), "--json").stdout)
    assert [a["kind"] for a in planned["host_prerequisites"]] == ["driver.install"]
    assert all(a["scope"] == "environment" for a in planned["actions"])
    # the steps the plan lists are the venv builder's, and none of them touches the driver
    assert [s["step"] for s in planned["steps"]] == ["resolve", "venv", "install", "env"]
    assert not any("driver" in s["summary"] for s in planned["steps"])


def test_an_apply_killed_installing_into_a_venv_root_does_not_block_the_next(tmp_path: Path, home: Path):
    """Issue 24: the orphan ROOT/generation-N of a killed apply made every later apply fail with
    "generation-N already exists". It carries this store's owner mark: the next apply of that
    number removes it; one without the mark (another store's, a user's) is still refused."""
    envs = tmp_path / "envs"
    spec = write_spec(tmp_path / "small.yaml", extra_env=f"realize: {{backend: venv, venv: {{path: {envs}}}}}\n")
    killed = envmgr(home, "apply", str(spec), "--yes", env={"ENVMGR_FAILPOINT": "installing"})
    assert killed.returncode == -signal.SIGKILL
    assert (envs / "generation-1" / ".envmgr-owner").is_file()  # claimed before anything was installed
    again = envmgr(home, "apply", str(spec), "--yes")
    assert again.returncode == 0, again.stderr
    assert "left by an apply of generation 1 that was interrupted" in again.stderr
    gen = Store(home).current()
    assert gen.number == 1 and installed_at(envs / "generation-1", "six") == "1.16.0"

    foreign = envs / "generation-2"
    (foreign / "bin").mkdir(parents=True)  # not ours: no owner mark
    write_spec(spec, six="1.17.0", extra_env=f"realize: {{backend: venv, venv: {{path: {envs}}}}}\n")
    refused = envmgr(home, "apply", str(spec), "--yes")
    assert refused.returncode == 1 and "already exists and is not an unfinished venv" in refused.stderr
    assert (foreign / "bin").is_dir() and Store(home).current().number == 1


def installed_at(venv: Path, name: str) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          f"import importlib.metadata as m; print(m.version({name!r}))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("point", ["locked", "link-made", "switched"])
def test_rollback_killed_at_every_step_under_load_leaves_one_usable_current(tmp_path: Path, home: Path, point: str):
    spec = write_spec(tmp_path / "small.yaml")
    assert envmgr(home, "apply", str(spec), "--yes").returncode == 0
    write_spec(spec, six="1.17.0")
    assert envmgr(home, "apply", str(spec), "--yes").returncode == 0
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]  # a busy machine
    try:
        for _ in range(2):
            killed = envmgr(home, "rollback", "--to", "1", env={"ENVMGR_FAILPOINT": point})
            assert killed.returncode == -signal.SIGKILL, killed.stderr
            store = Store(home)
            now = store.current()  # never none, never damaged: the old link or the new one
            assert now.number == (1 if point == "switched" else 2)
            assert Path(now.location, "bin", "python").exists()
            listing = envmgr(home, "generations", "--json")
            assert listing.returncode == 0 and "damaged" not in listing.stdout
            assert envmgr(home, "rollback", "--to", "2").returncode in (0,)  # the next switch works
            assert not list(home.glob(".current.*"))  # a killed switch's link does not pile up
    finally:
        for proc in load:
            proc.kill()
            proc.wait()
