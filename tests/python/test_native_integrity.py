"""kbv_native's record of the timing path below Python (src/native/integrity.h): nothing is
reported in a process nobody tampered with, and a GOT slot redirected or the vDSO's code
rewritten through /proc/self/mem (as examples/hacks/t4_proc_self_mem_clock.py does) is reported
and put back. Each case runs in a process of its own: it rewrites that process's memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import NATIVE_DIR, REPO

PRELUDE = f"""
import ctypes, struct, sys
sys.path.insert(0, {NATIVE_DIR!r})
sys.path.insert(0, {str(REPO / "python")!r})
import torch
import kbv_native

def write(address, data):
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(address)
        mem.write(data)

def mappings():
    with open("/proc/self/maps") as handle:
        for line in handle:
            fields = line.split()
            start, end = (int(v, 16) for v in fields[0].split("-"))
            yield start, end, fields[1], int(fields[2], 16), fields[5] if len(fields) > 5 else ""
"""


def run(body: str) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ
    )


pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc/self/mem and ELF are Linux's"
)


def test_nothing_is_reported_without_tampering():
    done = run(
        """
        assert kbv_native.integrity_changes() == [], kbv_native.integrity_changes()
        x = torch.randn(4096)
        samples = kbv_native.time_cpu(lambda i: torch.relu(x), 5, 2)
        assert len(samples) == 5 and all(s > 0 for s in samples), samples
        assert kbv_native.integrity_changes() == []
        """
    )
    if "No module named 'kbv_native'" in done.stderr:
        pytest.skip("kbv_native not built")
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_redirected_got_slot_is_reported_and_put_back():
    done = run(
        """
        path = kbv_native.__file__
        elf = open(path, "rb").read()
        shoff = struct.unpack_from("<Q", elf, 0x28)[0]
        entsize, count = struct.unpack_from("<HH", elf, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * entsize)
                    for i in range(count)]
        def symbols(index):
            _, _, _, _, offset, size, link, _, _, ent = sections[index]
            strtab = sections[link][4]
            out = []
            for k in range(size // ent):
                name = struct.unpack_from("<I", elf, offset + k * ent)[0]
                out.append(elf[strtab + name: elf.index(b"\\0", strtab + name)].decode())
            return out
        slots = {}
        for _, kind, _, _, offset, size, link, _, _, ent in sections:
            if kind == 4:
                names = symbols(link)
                for k in range(size // ent):
                    r_offset, r_info, _ = struct.unpack_from("<QQq", elf, offset + k * ent)
                    if (r_info & 0xFFFFFFFF) in (6, 7, 1025, 1026) and r_info >> 32:
                        slots[names[r_info >> 32]] = r_offset
        # A function this test never calls while the slot is wrong.
        name = next(n for n in ("cudaEventElapsedTime", "PyFrame_GetLineNumber") if n in slots)
        import os
        real = os.path.realpath(kbv_native.__file__)
        base = min(s for s, _, _, off, p in mappings() if p == real and off == 0)
        slot = base + slots[name]
        before = ctypes.c_uint64.from_address(slot).value
        write(slot, struct.pack("<Q", before + 16))
        assert ctypes.c_uint64.from_address(slot).value == before + 16
        changes = kbv_native.integrity_changes()
        assert any(name in c and "GOT slot" in c for c in changes), changes
        assert ctypes.c_uint64.from_address(slot).value == before  # put back
        assert kbv_native.integrity_changes() == []
        """
    )
    if "No module named 'kbv_native'" in done.stderr:
        pytest.skip("kbv_native not built")
    assert done.returncode == 0, done.stderr[-3000:]


def test_rewritten_vdso_code_is_reported_and_put_back():
    done = run(
        """
        vdso = [(s, e) for s, e, perms, _, name in mappings() if name == "[vdso]"]
        if not vdso:
            print("no vdso")
            raise SystemExit(0)
        start, end = vdso[0]
        # The executable segment's last byte (padding or a function's last instruction: never
        # run while this test rewrites it).
        image = ctypes.string_at(start, end - start)
        phoff = struct.unpack_from("<Q", image, 0x20)[0]
        phentsize, phnum = struct.unpack_from("<HH", image, 0x36)
        segments = [struct.unpack_from("<IIQQQQQQ", image, phoff + i * phentsize)
                    for i in range(phnum)]
        first = min(s[3] for s in segments if s[0] == 1)
        text = [s for s in segments if s[0] == 1 and s[1] & 1][0]
        last = start - first + text[3] + text[6] - 1
        old = ctypes.string_at(last, 1)
        write(last, bytes([old[0] ^ 0xFF]))
        changes = kbv_native.integrity_changes()
        assert any("vDSO" in c for c in changes), changes
        assert ctypes.string_at(last, 1) == old  # put back
        """
    )
    if "No module named 'kbv_native'" in done.stderr:
        pytest.skip("kbv_native not built")
    assert done.returncode == 0, done.stderr[-3000:]
