"""Can this environment's nvcc / ptxas build for the target arch? No GPU needed.

Every ptxas reachable the ways FlashInfer's JIT and users find them (FLASHINFER_NVCC,
CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda, pip wheels of this interpreter) assembles
a minimal PTX kernel for each arch asked; nvcc's --list-gpu-code is read where there
is an nvcc. The target arch is the first of args["archs"] (or args["arch"]).
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROBE = "toolchain_arch"

# Lowest PTX ISA version that knows each target (PTX ISA release notes).
PTX_ISA = {"sm_50": "4.0", "sm_52": "4.1", "sm_53": "4.2", "sm_60": "5.0", "sm_61": "5.0", "sm_62": "5.0",
           "sm_70": "6.0", "sm_72": "6.1", "sm_75": "6.3", "sm_80": "7.0", "sm_86": "7.1", "sm_87": "7.4",
           "sm_89": "7.8", "sm_90": "7.8", "sm_90a": "8.0", "sm_100": "8.6", "sm_100a": "8.6",
           "sm_101": "8.6", "sm_101a": "8.6", "sm_103": "8.8", "sm_103a": "8.8", "sm_110": "9.0",
           "sm_110a": "9.0", "sm_120": "8.7", "sm_120a": "8.7", "sm_121": "8.8", "sm_121a": "8.8"}
FAMILY_ISA = "8.8"  # sm_XXXf targets arrived with PTX ISA 8.8 (CUDA 12.9)


def ptx_for(arch):
    isa = FAMILY_ISA if arch.endswith("f") else PTX_ISA.get(arch, PTX_ISA.get(arch.rstrip("a"), "7.0"))
    return f".version {isa}\n.target {arch}\n.address_size 64\n\n.visible .entry envmgr_probe()\n{{\n\tret;\n}}\n"


def release_of(version_text):
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", version_text)
    return (m.group(1), m.group(2)) if m else (None, None)


def candidates():
    """(origin, directory with nvcc/ptxas), in FlashInfer's lookup order, then the rest."""
    found = []
    nvcc = os.environ.get("FLASHINFER_NVCC")
    if nvcc:
        found.append(("FLASHINFER_NVCC", os.path.dirname(shutil.which(nvcc) or nvcc)))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            found.append((var, os.path.join(os.environ[var], "bin")))
    for tool in ("nvcc", "ptxas"):
        path = shutil.which(tool)
        if path:
            found.append(("PATH", os.path.dirname(path)))
    found.append(("/usr/local/cuda", "/usr/local/cuda/bin"))
    for site in sys.path:
        for bindir in sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin"))):
            found.append(("pip", bindir))
    unique, seen = [], set()
    for origin, bindir in found:
        real = os.path.realpath(bindir)
        if os.path.isfile(os.path.join(real, "ptxas")) and real not in seen:
            seen.add(real)
            unique.append((origin, real))
    return unique


def assemble(ptxas, arch, workdir):
    src = os.path.join(workdir, f"{arch}.ptx")
    with open(src, "w") as handle:
        handle.write(ptx_for(arch))
    out = subprocess.run([ptxas, f"--gpu-name={arch}", "-o", os.path.join(workdir, f"{arch}.cubin"), src],
                         capture_output=True, text=True, timeout=60)
    text = (out.stderr or out.stdout).strip()
    return {"ok": out.returncode == 0, "error": text.splitlines()[-1] if out.returncode and text else ""}


def tool_report(origin, bindir, archs, workdir):
    ptxas = os.path.join(bindir, "ptxas")
    version = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=30).stdout
    release, full = release_of(version)
    report = {"origin": origin, "bin": bindir, "release": release, "version": full,
              "archs": {arch: assemble(ptxas, arch, workdir) for arch in archs}}
    nvcc = os.path.join(bindir, "nvcc")
    report["has_nvcc"] = os.path.isfile(nvcc)
    if report["has_nvcc"]:
        listed = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, timeout=30)
        report["nvcc_gpu_code"] = listed.stdout.split() if listed.returncode == 0 else []
    return report


def probe(args):
    archs = list(args.get("archs") or [args.get("arch") or "sm_90"])
    target = archs[0]
    tools = candidates()
    if not tools:
        return {"status": "skip", "summary": "no nvcc or ptxas in this environment", "details": {"archs": archs}}
    with tempfile.TemporaryDirectory(prefix="envmgr-toolchain-") as workdir:
        reports = [tool_report(origin, bindir, archs, workdir) for origin, bindir in tools]
    first = reports[0]  # what the JIT would use
    builds = [r for r in reports if r["archs"][target]["ok"]]
    details = {"target": target, "archs": archs, "tools": reports, "jit_tool": first["bin"]}
    if first["archs"][target]["ok"]:
        return {"status": "pass", "details": details,
                "summary": f"{target}: CUDA {first['release']} ptxas ({first['origin']}) builds it"}
    others = ", ".join(f"CUDA {r['release']} ({r['origin']})" for r in builds)
    summary = (f"{target}: CUDA {first['release']} ptxas ({first['origin']}) cannot build it: "
               f"{first['archs'][target]['error']}" + (f"; {others} can" if others else ""))
    return {"status": "fail", "summary": summary, "details": details}
