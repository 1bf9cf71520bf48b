"""Fleet provisioning benchmark (issue 4).

    python benchmarks/provision.py [--runs 3] [--hosts 3] [--serial 1] [--json]

Starts HOSTS containers of the base image (envmgr/base:bookworm, no network) as hosts
reached through Ansible's community.docker.docker connection, provisions them once from a
small spec (driver pin, CUDA 13.0 nvcc from wheels, a Python 3.11 venv), then times RUNS
no-op re-provisions: the fleet builder's steps for the same spec into a fresh generation
directory, which must report changed=0 on every host. Reported: the median and every run,
split into preparing on the controller (lock resolution, wheel cache) and the playbook.
The containers are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envmgr.builders.base import realize  # noqa: E402
from envmgr.builders.fleet import FleetBuilder  # noqa: E402
from envmgr.spec import load_spec  # noqa: E402

BASE_IMAGE = "envmgr/base:bookworm"
SPEC = """\
apiVersion: envmgr/v1
metadata: {{name: bench-fleet}}
hardware: {{gpu: {{arch: sm_90}}}}
driver: {{version: "580.95.05"}}
cuda:
  toolkits: [{{version: "13.0", source: pip}}]
python:
  version: "3.11"
  packages: {{packaging: "24.2"}}
realize:
  backend: ansible
  ansible: {{serial: {serial}, max_fail_percentage: 0}}
"""


class Timeline:
    """Progress sink that notes when the playbook starts (the first PLAY line)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.playbook_at: float | None = None

    def __call__(self, line: str) -> None:
        if self.playbook_at is None and line.startswith("PLAY"):
            self.playbook_at = time.perf_counter()


def start_hosts(client, count: int) -> list:
    prefix = f"envmgr-bench-{uuid.uuid4().hex[:6]}"
    return [client.containers.run(BASE_IMAGE, ["sleep", "infinity"], name=f"{prefix}-h{i}", detach=True,
                                  network_mode="none", labels={"dev.envmgr.test": "bench-provision"})
            for i in range(1, count + 1)]


def write_inventory(path: Path, names: list[str]) -> None:
    path.write_text("all:\n  hosts:\n" + "".join(f"    {n}: {{}}\n" for n in names)
                    + "  vars:\n    ansible_connection: community.docker.docker\n    ansible_user: root\n",
                    encoding="utf-8")


def provision(builder: FleetBuilder, loaded, workdir: Path) -> dict:
    timeline = Timeline()
    realized = realize(builder, loaded, [], timeline, workdir)
    done = time.perf_counter()
    changed = {host: result["changed"] for host, result in realized.details["hosts"].items()}
    tasks = {host: result["changed_tasks"] for host, result in realized.details["hosts"].items()
             if result["changed_tasks"]}
    playbook_at = timeline.playbook_at or timeline.started
    return {"total_s": done - timeline.started, "prepare_s": playbook_at - timeline.started,
            "playbook_s": done - playbook_at, "changed": changed, "changed_tasks": tasks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--serial", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import docker

    client = docker.from_env(timeout=120)
    containers = start_hosts(client, args.hosts)
    try:
        with tempfile.TemporaryDirectory(prefix="envmgr-bench-provision-") as scratch:
            where = Path(scratch)
            inventory = where / "inventory.yml"
            write_inventory(inventory, [c.name for c in containers])
            spec = where / "spec.yaml"
            spec.write_text(SPEC.format(serial=args.serial), encoding="utf-8")
            loaded = load_spec(spec)
            builder = FleetBuilder(f"ansible://all?inventory={inventory}&apt=offline")
            first = provision(builder, loaded, where / "gen-0")
            runs = [provision(builder, loaded, where / f"gen-{i}") for i in range(1, args.runs + 1)]
    finally:
        for container in containers:
            container.remove(force=True)

    not_noop = [run["changed_tasks"] for run in runs if any(run["changed"].values())]
    result = {
        "hosts": args.hosts, "serial": args.serial, "first_provision_s": round(first["total_s"], 2),
        "noop_median_s": round(statistics.median(r["total_s"] for r in runs), 2),
        "noop_prepare_median_s": round(statistics.median(r["prepare_s"] for r in runs), 2),
        "noop_playbook_median_s": round(statistics.median(r["playbook_s"] for r in runs), 2),
        "noop_runs_s": [round(r["total_s"], 2) for r in runs], "not_noop": not_noop,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"first provision of {args.hosts} hosts (serial {args.serial}): {result['first_provision_s']} s")
        print(f"no-op re-provision: median {result['noop_median_s']} s over {args.runs} runs "
              f"{result['noop_runs_s']} (prepare {result['noop_prepare_median_s']} s, "
              f"playbook {result['noop_playbook_median_s']} s)")
        if not_noop:
            print(f"NOT idempotent: {not_noop}")
    return 1 if not_noop else 0


if __name__ == "__main__":
    sys.exit(main())
