"""Parse the resource report that ``ptxas -v`` prints for each compiled function.

Ask for the report with ``--ptxas-options=-v`` (NVRTC) or ``-Xptxas -v`` /
``--resource-usage`` (nvcc), then hand the compile log to
:func:`parse_resource_report`::

    from asynccomp.ptxas import parse_resource_report

    resources = parse_resource_report(program_log)
    k = resources["my_kernel"]
    print(k.registers, k.spill_stores, k.shared_memory, k.arch)

A report block looks like this (NVRTC prefixes the stack-frame line with
``ptxas         .``, nvcc indents it with spaces instead)::

    ptxas info    : Compiling entry function 'k' for 'sm_80'
    ptxas info    : Function properties for k
    ptxas         .     128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 32 registers, used 1 barriers, 128 bytes cumulative stack size,
                    1024 bytes smem, 360 bytes cmem[0]        (one line in the log)

Rules:

* Keys are function names exactly as ptxas prints them: mangled for C++ kernels
  (``_Z2tkIfLi256EEvPT_``), plain for ``extern "C"`` ones. Every entry function
  (kernel) named in a ``Compiling entry function`` line is present, even when the
  rest of its block is missing. Non-inlined device functions that get their own
  ``Function properties`` block are included too, with ``entry=False``; ptxas
  reports only their stack frame and spills, so their registers stay 0.
* Fields the report leaves out are 0. ptxas omits zero-valued ``smem`` and, for
  sm_90 and newer, prints no ``cmem`` at all, so ``constant_memory`` is 0 there.
  ``constant_memory`` sums only the banks listed on the function's own ``Used``
  line (bank 0 holds the kernel parameters); module-wide ``__constant__`` data is
  reported once per module (``N bytes gmem, M bytes cmem[3]``) and is not
  attributed to any function.
* When one log holds several architectures (nvcc with several ``-gencode``
  targets runs ptxas once per target), :func:`parse_resource_report` keeps, for
  each name, the report for the *highest* architecture (``sm_90a`` > ``sm_90`` >
  ``sm_89`` ...; ``a`` > ``f`` > no suffix), independent of the order of the
  ``-gencode`` flags; the same name and architecture seen twice keeps the later
  one. Use :func:`parse_resource_report_by_arch` to get every architecture.
* nvlink's report (``-Xnvlink -v`` after ``-rdc``/``-dlink``: ``Function
  properties for 'k':`` then ``used 62 registers, ..., 136 stack, ...``) is also
  understood. It gives the final numbers after device code is linked, so its
  fields override the ptxas numbers of the same function (the latest report of
  that name); its ``N stack`` fills ``cumulative_stack``. With ``-rdc``, ptxas'
  per-kernel numbers leave out the callees (a kernel ptxas says uses 24
  registers may use 62 once linked), so prefer the linker's.
* Robust by design: warnings and errors may be interleaved, lines may end in
  ``\\r\\n``, NVRTC logs carry NUL bytes (at the end, and between ptxas' output
  and a later error), lines may carry a prefix (``1>  `` from MSBuild). Input
  without a report gives ``{}``; parsing never raises.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

__all__ = [
    "KernelResources",
    "parse_resource_report",
    "parse_resource_report_by_arch",
]


@dataclass(frozen=True)
class KernelResources:
    """Resources ptxas (or nvlink) reported for one function on one architecture."""

    registers: int
    """Registers per thread."""
    spill_stores: int
    """Bytes of register spill stores to local memory."""
    spill_loads: int
    """Bytes of register spill loads from local memory."""
    shared_memory: int
    """Bytes of static shared memory (``__shared__``; dynamic smem is a launch setting)."""
    stack_frame: int
    """Bytes of this function's own per-thread stack frame (local arrays, spills)."""
    constant_memory: int
    """Bytes, summed over the ``cmem[N]`` banks the report lists for this function."""
    barriers: int
    """Named barriers used."""
    local_memory: int = 0
    """Bytes of ``lmem`` if reported (old ptxas, nvlink); otherwise 0."""
    arch: str | None = None
    """Target such as ``'sm_90a'``, from ``Compiling entry function ... for ...``."""
    cumulative_stack: int = 0
    """Bytes of stack including callees (``cumulative stack size`` / nvlink ``stack``)."""
    entry: bool = True
    """False for a device function ptxas reported on its own."""

    def to_dict(self) -> dict[str, int | str | None]:
        """Plain dict of all fields, e.g. for JSON or a table row."""
        return asdict(self)


def parse_resource_report(log: str | bytes) -> dict[str, KernelResources]:
    """Map function name to its resources, from a ptxas ``-v`` report in ``log``.

    ``log`` is an NVRTC program log or nvcc's stderr (``bytes`` is decoded as
    UTF-8, bad bytes replaced). For several architectures in one log, each name
    keeps its highest architecture's report (see the module docstring). Names
    come in the order of their first appearance. Never raises; ``{}`` when the
    log has no report.
    """
    best: dict[str, _Record] = {}
    for rec in _parse(log):
        old = best.get(rec.name)
        # ">=": among equal architectures the later report wins (a recompiled
        # kernel in a concatenated log), while dict order stays first-seen.
        if old is None or _arch_rank(rec.arch) >= _arch_rank(old.arch):
            best[rec.name] = rec
    return {name: rec.freeze() for name, rec in best.items()}


def parse_resource_report_by_arch(
    log: str | bytes,
) -> dict[str | None, dict[str, KernelResources]]:
    """Like :func:`parse_resource_report`, but one dict per architecture.

    The outer key is the architecture (``'sm_80'``), or ``None`` for functions
    whose architecture the log never states (a linker-only report, or a device
    function in a log with no entry function).
    """
    out: dict[str | None, dict[str, KernelResources]] = {}
    for rec in _parse(log):
        out.setdefault(rec.arch, {})[rec.name] = rec.freeze()
    return out


# --- implementation ------------------------------------------------------------------------

_QUOTES = "'\"`\u2018\u2019"

# Searched (not matched at line start) so any prefix ("ptxas info    : ", "1>  ") is fine.
_ENTRY_RE = re.compile(r"Compiling entry function\s+(?P<rest>.*)$")
_ENTRY_FOR_RE = re.compile(r"^(?P<name>.*)\s+for\s+(?P<arch>\S+)$")
_PROPS_RE = re.compile(r"Function properties for\s+(?P<name>.*?)\s*$")
_FRAME_RE = re.compile(
    r"\b(?P<frame>\d+) bytes stack frame,\s*(?P<st>\d+) bytes spill stores,"
    r"\s*(?P<ld>\d+) bytes spill loads"
)
# "used" is lower case in nvlink's report, capitalised in ptxas'.
_USED_RE = re.compile(r"\b[Uu]sed (?P<n>\d+) registers\b")
_BARRIERS_RE = re.compile(r"\bused (?P<n>\d+) barriers\b")
# Very old ptxas printed "44+40 bytes smem" (declared + system); both parts count.
_SMEM_RE = re.compile(r"\b(?P<a>\d+)(?:\+(?P<b>\d+))? bytes smem\b")
_LMEM_RE = re.compile(r"\b(?P<a>\d+)(?:\+(?P<b>\d+))? bytes lmem\b")
_CMEM_RE = re.compile(r"\b(?P<a>\d+)(?:\+(?P<b>\d+))? bytes cmem\[\d+\]")
_CUMULATIVE_RE = re.compile(r"\b(?P<n>\d+) bytes cumulative stack size\b")
_LINK_STACK_RE = re.compile(r"\b(?P<n>\d+) stack\b")
# Start of one ptxas (or nvlink) run: the module-wide line comes first in each.
_MODULE_RE = re.compile(r"\b\d+ bytes gmem\b")
# "ptxas warning : ...", "ptxas application ptx input, line 5; error   : ...".
_DIAG_RE = re.compile(r"\b(?:warning|error|fatal)\s*:", re.IGNORECASE)
_ARCH_RE = re.compile(r"^(?:sm|compute|lto)_(?P<num>\d+)(?P<suffix>[a-z]?)$")
_SUFFIX_RANK = {"": 0, "f": 1, "a": 2}


@dataclass
class _Record:
    """Mutable twin of KernelResources while its lines are still arriving."""

    name: str
    arch: str | None
    entry: bool
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared_memory: int = 0
    stack_frame: int = 0
    constant_memory: int = 0
    barriers: int = 0
    local_memory: int = 0
    cumulative_stack: int = 0
    has_frame: bool = field(default=False, repr=False)

    def freeze(self) -> KernelResources:
        return KernelResources(
            registers=self.registers,
            spill_stores=self.spill_stores,
            spill_loads=self.spill_loads,
            shared_memory=self.shared_memory,
            stack_frame=self.stack_frame,
            constant_memory=self.constant_memory,
            barriers=self.barriers,
            local_memory=self.local_memory,
            arch=self.arch,
            cumulative_stack=self.cumulative_stack,
            entry=self.entry,
        )


def _int(text: str | None) -> int:
    # int() refuses digit strings past sys.get_int_max_str_digits(); garbage in a
    # log must not raise, and no real resource count is anywhere near that long.
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        return 0


def _sum_all(pattern: re.Pattern[str], line: str) -> int | None:
    """Sum of every "a[+b]" match, or None when the field is not on the line."""
    total: int | None = None
    for m in pattern.finditer(line):
        total = (total or 0) + _int(m["a"]) + _int(m["b"])
    return total


def _unquote(text: str) -> str:
    return text.strip().strip(_QUOTES).strip()


def _arch_rank(arch: str | None) -> tuple[int, int, int]:
    # Known "sm_NN[a|f]" beats an unrecognised string, which beats no arch at all.
    if arch is None:
        return (0, 0, 0)
    m = _ARCH_RE.match(arch)
    if m is None:
        return (1, 0, 0)
    return (2, _int(m["num"]), _SUFFIX_RANK.get(m["suffix"], 0))


def _lines(log: object) -> list[str]:
    if isinstance(log, (bytes, bytearray, memoryview)):
        text = bytes(log).decode("utf-8", errors="replace")
    elif isinstance(log, str):
        text = log
    else:
        return []
    # NUL is a line break: NVRTC puts one between ptxas' info output and a later
    # "ptxas error" line, not only at the end. splitlines() handles \r\n and \r.
    return text.replace("\x00", "\n").splitlines()


def _apply_used(rec: _Record, line: str) -> None:
    """Fill rec from a "Used N registers, ..." line; only fields present overwrite."""
    m = _USED_RE.search(line)
    if m is not None:
        rec.registers = _int(m["n"])
    m = _BARRIERS_RE.search(line)
    if m is not None:
        rec.barriers = _int(m["n"])
    smem = _sum_all(_SMEM_RE, line)
    if smem is not None:
        rec.shared_memory = smem
    lmem = _sum_all(_LMEM_RE, line)
    if lmem is not None:
        rec.local_memory = lmem
    cmem = _sum_all(_CMEM_RE, line)
    if cmem is not None:
        rec.constant_memory = cmem
    m = _CUMULATIVE_RE.search(line) or _LINK_STACK_RE.search(line)
    if m is not None:
        rec.cumulative_stack = _int(m["n"])


def _parse(log: object) -> list[_Record]:
    """Every report block in log order, one _Record per (function, ptxas run)."""
    records: list[_Record] = []
    current: _Record | None = None
    arch: str | None = None
    # Device functions reported before the run's first entry function have no arch
    # yet (ptxas with -G or -rdc does this); the next "Compiling entry" names it.
    pending: list[_Record] = []

    for raw in _lines(log):
        line = raw.strip()
        if not line or _DIAG_RE.search(line):
            # Warnings repeat numbers of the block (spills, stack frame) and errors
            # name functions; neither may start or change a record.
            continue

        m = _ENTRY_RE.search(line)
        if m is not None:
            rest = m["rest"].strip()
            fm = _ENTRY_FOR_RE.match(rest)
            if fm is not None:
                name, arch = _unquote(fm["name"]), _unquote(fm["arch"]) or None
            else:  # pre-Fermi ptxas: "Compiling entry function 'k'", no target
                name = _unquote(rest)
            for rec in pending:
                rec.arch = arch
            pending.clear()
            current = _Record(name=name, arch=arch, entry=True)
            records.append(current)
            continue

        m = _PROPS_RE.search(line)
        if m is not None:
            name_text = m["name"]
            if name_text.endswith(":"):
                # nvlink: "Function properties for 'k':", the linked result of k.
                name = _unquote(name_text[:-1])
                current = next((r for r in reversed(records) if r.name == name), None)
                if current is None:
                    current = _Record(name=name, arch=None, entry=True)
                    records.append(current)
                continue
            name = _unquote(name_text)
            if current is not None and current.name == name and not current.has_frame:
                continue  # the properties block of the entry just announced
            current = _Record(name=name, arch=arch, entry=False)
            records.append(current)
            if arch is None:
                pending.append(current)
            continue

        if current is not None:
            m = _FRAME_RE.search(line)
            if m is not None:
                current.stack_frame = _int(m["frame"])
                current.spill_stores = _int(m["st"])
                current.spill_loads = _int(m["ld"])
                current.has_frame = True
                continue
            if _USED_RE.search(line):
                _apply_used(current, line)
                continue

        if _MODULE_RE.search(line):
            # A new ptxas run (next -gencode target, next object): forget the
            # previous run's function and target so they are not mixed in.
            current = None
            arch = None
            pending.clear()

    return records
