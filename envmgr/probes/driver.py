"""Runs a batch of assembled probes on a host that has no envmgr, in one round trip.

The envmgr_probe role (playbooks/) sends this file's source with the new environment's
interpreter as ``python -c DRIVER RECORD KEY`` and the batch on stdin; it is standard
library only and imports nothing of envmgr. Each probe runs one after another as
``python -c SOURCE ARGS_JSON`` (what the runner sends through every other backend) in its
own process group, with its own timeout, past which the whole group is killed and the run
says so. The runs are printed as one JSON list (the controller reads them from the task's
result), and written with ``KEY`` to ``RECORD`` (atomically, by a rename) once all have
run: a later provision of the same environment reads that record instead of probing again.

    stdin:  {"env": {NAME: VALUE}, "probes": [{"id", "source", "args", "timeout_s"}, ...]}
    stdout: [{"probe", "rc", "stdout", "stderr", "wall_s", "timed_out", "timeout_s"}, ...]
    RECORD: {"key": KEY, "runs": [the same]}
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def run_one(probe: dict, env: dict) -> dict:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", probe["source"], json.dumps(probe.get("args") or {})],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        start_new_session=True, text=True, errors="replace")
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=probe["timeout_s"])
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the probe and every process it started
        except ProcessLookupError:
            pass
        stdout, stderr = proc.communicate()
    return {"probe": probe["id"], "rc": proc.returncode, "stdout": stdout, "stderr": stderr,
            "wall_s": round(time.monotonic() - started, 3),
            "timed_out": timed_out, "timeout_s": probe["timeout_s"]}


def record(path: str, key: str, runs: list) -> None:
    where = os.path.dirname(path) or "."
    fd, temp = tempfile.mkstemp(dir=where, prefix=".envmgr-probes-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"key": key, "runs": runs}, out)
            out.write("\n")
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def main(argv: list) -> int:
    path, key = argv[1], argv[2]
    batch = json.load(sys.stdin)
    env = {**os.environ, **(batch.get("env") or {})}
    runs = [run_one(probe, env) for probe in batch["probes"]]
    print(json.dumps(runs), flush=True)
    try:
        record(path, key, runs)
    except OSError as exc:  # the results still reach the controller; the next provision probes again
        print(f"envmgr: could not record the probe results in {path}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
