"""envmgr/probes/driver.py, the probe driver the envmgr_probe role runs on Ansible hosts,
run here for real: each probe in its own process group, a hung one killed with its
children at its timeout, the runs printed and recorded under the environment's key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

from envmgr.ansible.probes import driver_runs, probe_result
from envmgr.probes.contract import MARKER, WRAPPER

DRIVER = resources.files("envmgr.probes").joinpath("driver.py").read_text(encoding="utf-8")

PASSING = '''
PROBE = "ok"
def probe(args):
    import os
    return {"status": "pass", "summary": f"arg={args['n']} env={os.environ['ENVMGR_T']}"}
''' + WRAPPER
CRASHING = "import os\nos.abort()\n"
# Starts a grandchild that would outlive it, writes its pid, then hangs.
HANGING = '''
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
open(%r, "w").write(str(child.pid))
time.sleep(300)
'''


def run_driver(tmp_path: Path, probes: list[dict]) -> tuple[subprocess.CompletedProcess, Path]:
    record = tmp_path / "venv" / ".envmgr-probes-0123.json"
    record.parent.mkdir()
    batch = json.dumps({"env": {"ENVMGR_T": "1"}, "probes": probes})
    done = subprocess.run([sys.executable, "-c", DRIVER, str(record), "key-1"], input=batch,
                          capture_output=True, text=True, timeout=60, check=False)
    return done, record


def test_runs_each_probe_and_records_them_under_the_key(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    done, record = run_driver(tmp_path, [
        {"id": "ok", "source": PASSING, "args": {"n": 3}, "timeout_s": 30},
        {"id": "crash", "source": CRASHING, "args": {}, "timeout_s": 30},
        {"id": "hang", "source": HANGING % str(pidfile), "args": {}, "timeout_s": 1.5},
    ])
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 20  # the hung probe did not hold the batch
    runs = json.loads(done.stdout)
    assert [r["probe"] for r in runs] == ["ok", "crash", "hang"]
    ok, crash, hang = (probe_result(run) for run in driver_runs({"stdout": done.stdout}))
    assert (ok.status, ok.summary) == ("pass", "arg=3 env=1")  # args and env reached the probe
    assert crash.status == "error" and "exit" in crash.summary
    assert hang.status == "error" and hang.summary == "timed out after 1.5s; its processes were killed"
    # the whole process group went with it, the grandchild too
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"grandchild {pid} still running")
    saved = json.loads(record.read_text())
    assert saved == {"key": "key-1", "runs": runs}
    assert [p.name for p in record.parent.iterdir()] == [record.name]  # no temporary file left


def test_results_still_come_back_when_the_record_cannot_be_written(tmp_path):
    record = tmp_path / "absent-dir" / "record.json"
    batch = json.dumps({"probes": [{"id": "ok", "source": PASSING.replace("os.environ['ENVMGR_T']", "'-'"),
                                    "args": {"n": 1}, "timeout_s": 30}]})
    done = subprocess.run([sys.executable, "-c", DRIVER, str(record), "k"], input=batch,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0
    assert MARKER in json.loads(done.stdout)[0]["stdout"]
    assert "could not record" in done.stderr and not record.exists()
