"""Wheels for the offline tests: real PyPI wheels fetched once into a cache, and small wheels
written here (a wheel is a zip with METADATA, WHEEL and RECORD; pip and uv install it as any)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

# Small pure-Python wheels from PyPI (tens of kB), fetched by exact version.
PYPI_WHEELS = ("six==1.16.0", "idna==3.7")
CACHE = Path(os.environ.get("ENVMGR_TEST_WHEELS", Path.home() / ".cache" / "envmgr-test-wheels"))


def pypi_wheels(dest: Path) -> list[Path]:
    """Copy the real PyPI wheels of ``PYPI_WHEELS`` into ``dest`` (downloaded once, hash-kept)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    wanted = [w.replace("==", "-") for w in PYPI_WHEELS]
    if not all(any(f.name.startswith(w + "-") for f in CACHE.glob("*.whl")) for w in wanted):
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--only-binary=:all:", "--dest", str(CACHE), *PYPI_WHEELS],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pip download {PYPI_WHEELS} failed (the offline tests need them once): "
                               f"{done.stderr.strip()[-500:]}")
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for wheel in sorted(CACHE.glob("*.whl")):
        if any(wheel.name.startswith(w + "-") for w in wanted):
            copied.append(Path(shutil.copy2(wheel, dest / wheel.name)))
    return copied


def make_wheel(dest: Path, name: str, version: str, requires: tuple[str, ...] = (),
               module: str | None = None) -> Path:
    """A pure-Python wheel of one module ``module`` (default: the name) that says its version."""
    dest.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    module = module or dist
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{module}.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
                            f"Name: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: envmgr-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    wheel = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), text)
    return wheel
