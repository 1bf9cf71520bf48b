"""Which shared libraries a wheel's compiled extension needs (its ELF DT_NEEDED entries).

A kernel wheel (sgl-kernel, sglang-kernel) is 300-600 MB; the answer is in one member's dynamic
section. ``Ranged`` reads byte ranges of a wheel, local or by HTTP ``Range`` requests, so only
the zip directory and that member travel (25-30 MB compressed). ``needed`` is a pure parser of
ELF64 little-endian bytes: the PT_DYNAMIC segment's DT_NEEDED strings, found in DT_STRTAB
through the PT_LOAD segment that maps it.
"""

from __future__ import annotations

import struct
import urllib.request
import zlib
from pathlib import Path
from typing import Callable

Read = Callable[[int, int], bytes]  # (start, end) -> the bytes [start, end)

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB = 0, 1, 5


def http_ranges(url: str) -> Read:
    def read(start: int, end: int) -> bytes:
        request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            if response.status != 206:
                raise OSError(f"{url}: the server ignored the byte range (HTTP {response.status})")
            return response.read()
    return read


def file_ranges(path: Path) -> Read:
    def read(start: int, end: int) -> bytes:
        with open(path, "rb") as handle:
            handle.seek(start)
            return handle.read(end - start)
    return read


def members(read: Read, size: int) -> dict[str, tuple[int, int, int]]:
    """name -> (compression method, compressed size, local header offset), from the zip's
    central directory (at the end of the file)."""
    tail = read(max(0, size - 65536), size)
    eocd = tail.rfind(b"PK\x05\x06")
    if eocd < 0:
        raise ValueError("not a zip file (no end of central directory)")
    cd_size, cd_offset = struct.unpack("<II", tail[eocd + 12:eocd + 20])
    directory = read(cd_offset, cd_offset + cd_size)
    found, at = {}, 0
    while directory[at:at + 4] == b"PK\x01\x02":
        method, = struct.unpack("<H", directory[at + 10:at + 12])
        compressed, = struct.unpack("<I", directory[at + 20:at + 24])
        name_len, extra_len, comment_len = struct.unpack("<HHH", directory[at + 28:at + 34])
        offset, = struct.unpack("<I", directory[at + 42:at + 46])
        found[directory[at + 46:at + 46 + name_len].decode("utf-8")] = (method, compressed, offset)
        at += 46 + name_len + extra_len + comment_len
    return found


def member_bytes(read: Read, member: tuple[int, int, int]) -> bytes:
    method, compressed, offset = member
    local = read(offset, offset + 30)
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    data = read(offset + 30 + name_len + extra_len, offset + 30 + name_len + extra_len + compressed)
    if method == 0:
        return data
    if method == 8:
        return zlib.decompress(data, -15)
    raise ValueError(f"zip compression method {method} is not read here")


def needed(elf: bytes) -> list[str]:
    """The DT_NEEDED library names of an ELF64 little-endian shared object, in order."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not an ELF64 little-endian file")
    phoff, = struct.unpack("<Q", elf[0x20:0x28])
    phentsize, phnum = struct.unpack("<HH", elf[0x36:0x3A])
    loads, dynamic = [], None
    for k in range(phnum):
        kind, _, offset, vaddr, _, filesz = struct.unpack("<IIQQQQ", elf[phoff + k * phentsize:][:40])
        if kind == PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif kind == PT_DYNAMIC:
            dynamic = (offset, filesz)
    if dynamic is None:
        return []  # statically linked
    entries = []
    for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, value = struct.unpack("<qQ", elf[at:at + 16])
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    strtab = next(v for t, v in entries if t == DT_STRTAB)
    base = next(offset + strtab - vaddr for vaddr, offset, size in loads if vaddr <= strtab < vaddr + size)
    return [elf[base + v:elf.index(b"\0", base + v)].decode("utf-8") for t, v in entries if t == DT_NEEDED]
