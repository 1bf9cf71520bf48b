"""Probe: GPU peer-to-peer access for every ordered pair, and the link between them.

Standalone (probe contract): stdlib at module level; torch (and pynvml, when the environment has
nvidia-ml-py) only inside probe(). What custom all-reduce kernels and torch symmetric memory need:
peer access between every pair. Sources, each reported:
  - torch.cuda.can_device_access_peer(i, j)  (decides the status when torch has CUDA)
  - NVML P2P status per capability (read, write, nvlink, atomics), when pynvml is importable
    (decides when torch is absent)
  - ``nvidia-smi topo -m`` parsed into a matrix of link types (X, NV#, PIX, PXB, PHB, NODE, SYS)
One GPU: the pair checks are skipped with the reason; the topology is still reported.

args: none used (accepted for the contract).

details: gpus_visible, torch, cuda, topology {gpus, nics, links {row: {col: type}}, affinity,
  nic_names, raw} | {error}, gpu_link_counts, smi_uuids, cuda_to_smi_index, nvml_available,
  decided_by, pairs [{src, dst, link, torch, nvml {read, write, nvlink, atomics}, peer_access}],
  pairs_without_access.
"""

from __future__ import annotations

import itertools
import re

PROBE = "p2p"

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the header on a terminal
GPU_COLUMN = re.compile(r"^GPU\d+$")
NVML_P2P_STATUS = {0: "OK", 1: "CHIPSET_NOT_SUPPORTED", 2: "GPU_NOT_SUPPORTED",
                   3: "IOH_TOPOLOGY_NOT_SUPPORTED", 4: "DISABLED_BY_REGKEY", 5: "NOT_SUPPORTED", 6: "UNKNOWN"}
NVML_P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3}  # NVML_P2P_CAPS_INDEX_*


def parse_topo_matrix(text: str) -> dict:
    """``nvidia-smi topo -m`` -> {"gpus", "nics", "links": {row: {col: type}}, "affinity", "nic_names"}.

    The header is tab separated: device columns (GPU#, NIC#; older drivers name NICs mlx5_#) then
    CPU Affinity, NUMA Affinity and (newer drivers) GPU NUMA ID. Rows repeat the tabs, with an
    empty field before GPU NUMA ID; NIC rows stop after the device columns.
    """
    lines = [ANSI_ESCAPE.sub("", line) for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if "GPU0" in [f.strip() for f in line.split("\t")]), None)
    if header_at is None:
        raise ValueError("no header with a GPU0 column in the nvidia-smi topo -m output")
    columns = [c.strip() for c in lines[header_at].split("\t")]
    columns = columns[1:] if columns and not columns[0] else columns
    devices = list(itertools.takewhile(lambda c: c and " " not in c, columns))  # "CPU Affinity" has a space
    extra_columns = [c for c in columns[len(devices):] if c]
    links, affinity = {}, {}
    for line in lines[header_at + 1:]:
        fields = line.split("\t")
        name = fields[0].strip()
        if name not in devices:
            break  # a blank line ends the matrix; the legend follows
        values = [f.strip() for f in fields[1:]]
        links[name] = dict(zip(devices, values[:len(devices)]))
        rest = [v for v in values[len(devices):] if v]
        if rest:
            affinity[name] = dict(zip(extra_columns, rest))
    gpus = [d for d in devices if GPU_COLUMN.match(d)]
    return {"gpus": gpus, "nics": [d for d in devices if d not in gpus], "links": links,
            "affinity": affinity, "nic_names": parse_nic_legend(lines)}


def parse_nic_legend(lines: list[str]) -> dict:
    """The "NIC Legend:" block: NIC0: mlx5_0 -> {"NIC0": "mlx5_0"}."""
    names = {}
    for line in lines:
        match = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if match:
            names[match.group(1)] = match.group(2)
    return names


def link_class(link: str) -> str:
    """self | nvlink | pcie | unknown, for one matrix cell."""
    if link == "X":
        return "self"
    if re.fullmatch(r"NV\d+", link):
        return "nvlink"
    if link in ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC"):  # SOC: older drivers' name for SYS
        return "pcie"
    return "unknown"


def gpu_links(topology: dict) -> dict:
    """Count of each link type over ordered GPU pairs, e.g. {"NV18": 56} on an HGX H200."""
    counts: dict[str, int] = {}
    for row in topology["gpus"]:
        for col in topology["gpus"]:
            if row != col:
                link = topology["links"].get(row, {}).get(col, "?")
                counts[link] = counts.get(link, 0) + 1
    return counts


def parse_smi_uuids(listing: str) -> dict[int, str]:
    """``nvidia-smi -L`` -> {index: "GPU-..."} (MIG lines are not GPUs of the matrix)."""
    found = {}
    for line in listing.splitlines():
        match = re.match(r"^GPU (\d+): .*\(UUID: (GPU-[0-9a-fA-F-]+)\)", line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def normalize_uuid(uuid: str) -> str:
    uuid = str(uuid).strip().lower()
    return uuid[4:] if uuid.startswith("gpu-") else uuid


def cuda_to_smi_index(cuda_uuids: list[str | None], smi_uuids: dict[int, str]) -> list[int | None]:
    """nvidia-smi's index of each CUDA device: CUDA_VISIBLE_DEVICES and CUDA's order can differ from it."""
    by_uuid = {normalize_uuid(u): index for index, u in smi_uuids.items()}
    return [by_uuid.get(normalize_uuid(u)) if u else None for u in cuda_uuids]


def pair_status(pairs: list[dict], decided_by: str | None, gpus: int) -> tuple[str, str]:
    """(status, summary) from the ordered pairs' peer access."""
    if decided_by is None:
        return "skip", "no source of peer access: torch without CUDA and no pynvml"
    missing = [f"{p['src']}->{p['dst']} ({p.get('link') or '?'})" for p in pairs if not p["peer_access"]]
    links = sorted({p.get("link") or "?" for p in pairs})
    if missing:
        return "fail", (f"no peer access for {len(missing)}/{len(pairs)} ordered pairs ({decided_by}): "
                        + ", ".join(missing[:12]))
    return "pass", (f"peer access for all {len(pairs)} ordered pairs of {gpus} GPUs ({decided_by}); "
                    f"links: {', '.join(links)}")


def run_text(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why not)."""
    import subprocess

    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{' '.join(argv)}: {exc}"
    if out.returncode != 0:
        return None, f"{' '.join(argv)} exited {out.returncode}: {(out.stdout + out.stderr).strip()[:300]}"
    return out.stdout, None


def read_topology() -> dict:
    text, why_not = run_text(["nvidia-smi", "topo", "-m"])
    if text is None:
        return {"error": why_not}
    try:
        return {**parse_topo_matrix(text), "raw": text[:4000]}
    except ValueError as exc:
        return {"error": str(exc), "raw": text[:4000]}


def nvml_p2p(smi_pairs: list[tuple[int, int]]) -> dict | None:
    """{(i, j): {"read": "OK", ...}} by nvidia-smi index, or None without pynvml or a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        handles: dict = {}
        result = {}
        for i, j in smi_pairs:
            for index in (i, j):
                if index not in handles:
                    handles[index] = pynvml.nvmlDeviceGetHandleByIndex(index)
            result[(i, j)] = {cap: nvml_status_name(pynvml, handles[i], handles[j], code)
                              for cap, code in NVML_P2P_CAPS.items()}
        return result
    finally:
        pynvml.nvmlShutdown()


def nvml_status_name(pynvml, first, second, cap: int) -> str:
    try:
        code = pynvml.nvmlDeviceGetP2PStatus(first, second, cap)
    except Exception as exc:  # an old driver without this query
        return f"error: {exc}"
    return NVML_P2P_STATUS.get(int(code), str(code))


def torch_cuda():
    try:
        import torch
    except Exception:
        return None
    return torch if torch.version.cuda is not None and torch.cuda.is_available() else None


def cuda_uuids(torch, count: int) -> list[str | None]:
    uuids = []
    for index in range(count):
        try:
            uuids.append(str(torch.cuda.get_device_properties(index).uuid))
        except Exception:  # torch before device uuids
            uuids.append(None)
    return uuids


def probe(args: dict) -> dict:
    topology = read_topology()
    listing, _ = run_text(["nvidia-smi", "-L"])
    smi_uuids = parse_smi_uuids(listing or "")
    torch = torch_cuda()
    details: dict = {"topology": topology, "smi_uuids": smi_uuids}
    if torch is not None:
        count = torch.cuda.device_count()
        details.update(torch=torch.__version__, cuda=torch.version.cuda)
        smi_index = cuda_to_smi_index(cuda_uuids(torch, count), smi_uuids)
        if None in smi_index and len(smi_uuids) == count:  # no uuids to match: same order as nvidia-smi
            smi_index = list(range(count))
    else:
        count = len(smi_uuids) or len(topology.get("gpus", []))
        smi_index = list(range(count))
    details.update(gpus_visible=count, cuda_to_smi_index=smi_index)
    if "gpus" in topology:
        details["gpu_link_counts"] = gpu_links(topology)
    if count == 0:
        why = "no NVIDIA GPU visible"
        return {"status": "skip", "summary": why, "details": {**details, "reason": why}}
    if count == 1:
        why = "one GPU: no pair to check peer access for (topology reported)"
        return {"status": "skip", "summary": why, "details": {**details, "reason": why}}
    ordered = [(i, j) for i in range(count) for j in range(count) if i != j]
    known = [(smi_index[i], smi_index[j]) for i, j in ordered if None not in (smi_index[i], smi_index[j])]
    nvml = nvml_p2p(known)
    details["nvml_available"] = nvml is not None
    pairs = []
    for i, j in ordered:
        si, sj = smi_index[i], smi_index[j]
        pair = {"src": i, "dst": j, "link": topology.get("links", {}).get(f"GPU{si}", {}).get(f"GPU{sj}")}
        if torch is not None:
            pair["torch"] = bool(torch.cuda.can_device_access_peer(i, j))
        if nvml is not None and (si, sj) in nvml:
            pair["nvml"] = nvml[(si, sj)]
        pair["peer_access"] = pair["torch"] if torch is not None else pair.get("nvml", {}).get("read") == "OK"
        pairs.append(pair)
    decided_by = "torch" if torch is not None else ("nvml" if nvml is not None else None)
    status, summary = pair_status(pairs, decided_by, count)
    details.update(pairs=pairs, decided_by=decided_by,
                   pairs_without_access=[[p["src"], p["dst"]] for p in pairs if not p["peer_access"]])
    return {"status": status, "summary": summary, "details": details}
