"""What one sandbox leaves for the next (``grader.sandbox``, ``grader.slots``): nothing.

The seccomp filter that keeps the kernel's keyrings out of reach is read back as the kernel runs it, for x86_64 (and
its x32 calls) and aarch64. Cost: milliseconds.
"""
import struct

import pytest

from grader import sandbox

# ---------------------------------------------------------------- the filter, read back
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM = 1
# AUDIT_ARCH_* (linux/audit.h) and the system calls' numbers (arch/x86/entry/syscalls/syscall_64.tbl and
# syscall_32.tbl; include/uapi/asm-generic/unistd.h for aarch64; arch/arm/tools/syscall.tbl)
X86_64, I386, X32_BIT = 0xC000003E, 0x40000003, 0x40000000
AARCH64, ARM = 0xC00000B7, 0x40000028
KEYRING = {X86_64: (248, 249, 250), AARCH64: (217, 218, 219), I386: (286, 287, 288), ARM: (309, 310, 311)}
ORDINARY = {X86_64: (0, 1, 2, 9, 56, 59, 231, 257, 435), AARCH64: (56, 63, 64, 93, 220, 221, 222, 435)}


def run_bpf(program, nr, arch):
    """What classic-BPF ``program`` (struct sock_filter, 8 bytes each) returns for a system call ``nr`` of ``arch``
    (struct seccomp_data: nr, arch, instruction pointer, six arguments): the kernel's interpreter, for the
    instructions a seccomp filter may hold (linux/filter.h; an unknown one fails the test)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *[0] * 6)
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    a = x = pc = 0
    mem = [0] * 16
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        cls = code & 0x07
        if code == 0x20:                           # ld [k]
            a = struct.unpack_from("=I", data, k)[0]
        elif code == 0x00:                         # ld #k
            a = k
        elif code == 0x01:                         # ldx #k
            x = k
        elif code == 0x60:                         # ld M[k]
            a = mem[k]
        elif code == 0x61:                         # ldx M[k]
            x = mem[k]
        elif code == 0x02:                         # st M[k]
            mem[k] = a
        elif code == 0x03:                         # stx M[k]
            mem[k] = x
        elif cls == 0x04:                          # alu
            operand = x if code & 0x08 else k
            op = code & 0xF0
            a = {0x00: a + operand, 0x10: a - operand, 0x20: a * operand, 0x40: a | operand, 0x50: a & operand,
                 0x60: a << operand, 0x70: a >> operand, 0xA0: a ^ operand}[op] & 0xFFFFFFFF
        elif cls == 0x05:                          # jumps
            operand = x if code & 0x08 else k
            op = code & 0xF0
            if op == 0x00:
                pc += k
                continue
            taken = {0x10: a == operand, 0x20: a > operand, 0x30: a >= operand, 0x40: bool(a & operand)}[op]
            pc += jt if taken else jf
        elif code == 0x06:                         # ret #k
            return k
        elif code == 0x16:                         # ret a
            return a
        elif code == 0x87:                         # txa
            a = x
        elif code == 0x07:                         # tax
            x = a
        else:
            raise AssertionError(f"instruction {code:#x} at {pc - 1}: not one this reader knows")


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=["x86_64", "aarch64"])
def test_the_seccomp_filter_refuses_the_keyring_calls_and_every_other_architectures_calls(arch):
    """The program bwrap loads (``sandbox.seccomp_program``), run as the kernel runs it: the three keyring calls get
    EPERM, ordinary calls pass, and a call through another calling convention (x32 and i386 on x86_64, 32-bit ARM on
    aarch64) or of another architecture ends the process."""
    import pyseccomp
    program = sandbox.seccomp_program(pyseccomp.Arch.X86_64 if arch == X86_64 else pyseccomp.Arch.AARCH64)
    assert len(program) % 8 == 0 and program
    for nr in KEYRING[arch]:
        assert run_bpf(program, nr, arch) == SECCOMP_RET_ERRNO | EPERM, nr
    for nr in ORDINARY[arch]:
        assert run_bpf(program, nr, arch) == SECCOMP_RET_ALLOW, nr
    others = {X86_64: [I386, AARCH64, ARM], AARCH64: [ARM, X86_64, I386]}[arch]
    for other in others:
        for nr in KEYRING[other] + (0, 3):
            assert run_bpf(program, nr, other) == SECCOMP_RET_KILL_PROCESS, (hex(other), nr)
    if arch == X86_64:
        for nr in KEYRING[X86_64] + (0, 1, 59):
            assert run_bpf(program, nr | X32_BIT, arch) == SECCOMP_RET_KILL_PROCESS, nr
