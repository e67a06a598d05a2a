"""Options that name files: each is accounted for by the cache, or refused.

A cache key hashes a job's source and the text of its options, and an entry lists the
headers the compile read (nvcc's dependency report, NVRTC's include scan,
:mod:`asynccomp.cache._deps`), checked at each lookup. A file an option names that
neither covers would be read by the compiler and by nothing else: changed, the next
compile would be a hit with the old binary. ccache expands response files into the
hashed arguments and refuses options it cannot account for; here every option family
that names a file is one of (each tried on the real compilers,
``tests/test_named_files.py``):

- **accounted for**: include folders (``-I``, ``--include-path``) and pre-included
  headers (``-include``, ``--pre-include``): the headers read are the entry's
  dependencies. nvcc's system folders (``-isystem``, ``--system-include``, and the host
  compiler's own, ``-Xcompiler -isystem,...``/``-idirafter``/``--sysroot``) are too: such
  a job asks nvcc for every header it read (``-MD``; ``-MMD``, the default, leaves out
  those of system folders);
- **no effect**: what only a link step reads (``-Xlinker``, ``-Xnvlink``, ``-L``,
  ``-l``, ``--library``, ``--cudart``, ``-Xarchive``): a job compiles one source to a
  cubin, fatbin or PTX and never links (nvcc does not open them: tested);
- **refused** (:class:`~asynccomp.InvalidJob`, saying why): option files
  (``-optf``/``--options-file``, to nvcc, NVRTC, ptxas or, inside ``-Xptxas``, ptxas run
  by any backend), the host compiler's response files and plug-ins (``-Xcompiler
  @FILE``, ``-specs=``, ``-fplugin=``, ``-B``), files ptxas would assemble into the cubin
  besides the job's source (a positional input among a PTX job's options, or inside
  ``-Xptxas``: ptxas assembles every input it is given), NVRTC's precompiled header files
  (``--use-pch``, ``--create-pch``, ``--pch-dir``: ``CompileJob(pch=True)`` is the way),
  and another libdevice (``--libdevice-directory``).

Checked as a job is built (:meth:`~asynccomp.backends.CompilerBackend.check_job`):
plain code, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..errors import InvalidJob

__all__ = ("check_named_files", "reads_system_folders")

# ptxas's options that take a value ("ptxas --help": those with <...>), long and short:
# the token after one of them, given alone, is its value, not an input file.
_PTXAS_VALUED = frozenset(
    {
        "--Ofast-compile", "--allow-expensive-optimizations", "--device-function-maxrregcount",
        "--device-stack-protector", "--entry", "--fmad", "--gpu-name", "--input-as-string",
        "--machine", "--maxntid", "--maxrregcount", "--minnctapersm", "--opt-level",
        "--options-file", "--output-file", "--position-independent-code",
        "--register-usage-level", "--sanitize", "--split-compile", "-O", "-Ofc",
        "-allow-expensive-optimizations", "-arch", "-device-stack-protector", "-e", "-fmad",
        "-func-maxrregcount", "-ias", "-m", "-maxntid", "-maxrregcount", "-minnctapersm",
        "-o", "-optf", "-pic", "-regUsageLevel", "-sanitize", "-split-compile",
    }
)  # fmt: skip
_OPTION_FILES = ("-optf", "--options-file")
_PTXAS_OPTIONS = ("-Xptxas", "--ptxas-options")
_HOST_OPTIONS = ("-Xcompiler", "--compiler-options")

_NOT_COVERED = (
    "the cache key covers the job's source and options, not that file's contents (a "
    "changed file would be answered from the cache)"
)
_OPTION_FILE = (
    f"refused: an options file; {_NOT_COVERED}, and its relative paths would mean the "
    "compiler's folder: put its options in CompileJob.options"
)
#: NVRTC's options that name a precompiled header file or folder, in every spelling it
#: takes (one dash or two; ``-`` or ``_``).
PCH_FILE_OPTIONS = tuple(
    f"{dash}{name}"
    for dash in ("-", "--")
    for name in ("use-pch", "use_pch", "create-pch", "create_pch", "pch-dir", "pch_dir")
)
_REFUSED = {
    **dict.fromkeys(_OPTION_FILES, _OPTION_FILE),
    **dict.fromkeys(
        PCH_FILE_OPTIONS,
        f"refused: names a precompiled header file; {_NOT_COVERED}: use CompileJob(pch=True), "
        "whose precompiled headers asynccomp keeps",
    ),
    **dict.fromkeys(
        ("--libdevice-directory", "-ldir"),
        f"refused: names the folder of another libdevice; {_NOT_COVERED}",
    ),
}
# The host compiler's options that read a file of their own (gcc's).
_HOST_REFUSED = ("@", "-specs", "--specs", "-fplugin", "-B")
# The host compiler's options that add or move system header folders, whose headers
# nvcc's -MMD leaves out.
_HOST_SYSTEM = ("-isystem", "-idirafter", "-isysroot", "--sysroot", "-iprefix", "-iwithprefix")
_SYSTEM_FOLDERS = ("-isystem", "--system-include")


def _values(options: Sequence[str], names: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(shown, value)`` for each use of an option of ``names``: ``NAME=VALUE`` or
    ``NAME VALUE`` (the option given alone); ``shown``: the option as written."""
    pending: str | None = None
    for option in options:
        if pending is not None:
            yield f"{pending} {option}", option
            pending = None
            continue
        name, equals, value = option.partition("=")
        if name in names:
            if equals:
                yield option, value
            else:
                pending = option


def _ptxas_problem(tokens: Sequence[str]) -> tuple[str, str] | None:
    """``(token, why)`` for the first of ptxas's arguments that names a file the key
    does not cover: an options file, or an input file (ptxas assembles every input
    into its output)."""
    value_next = False
    for token in tokens:
        if value_next:
            value_next = False
            continue
        if not token:
            continue
        if token.startswith("-"):
            name, equals, _ = token.partition("=")
            if name in _OPTION_FILES:
                return token, _OPTION_FILE
            value_next = not equals and token in _PTXAS_VALUED
            continue
        return token, (
            f"refused: ptxas would assemble the file {token!r} into the cubin besides the "
            f"job's source; {_NOT_COVERED}: compile it as a job of its own"
        )
    return None


def check_named_files(
    options: Sequence[str], *, ptxas_argv: bool = False, comma_lists: bool = False
) -> None:
    """Raise :class:`~asynccomp.InvalidJob` for an option that names a file the cache
    cannot account for (see the module's notes).

    ``ptxas_argv``: the options are ptxas's own arguments (the ``ptx`` backend), so a
    word that is no option's value is an input file. ``comma_lists``: the compiler
    splits the values of ``-Xptxas`` and ``-Xcompiler`` at commas (nvcc)."""
    for option in options:
        why = _REFUSED.get(option.partition("=")[0])
        if why is not None:
            raise InvalidJob("options", option, why)
    if ptxas_argv:
        problem = _ptxas_problem(options)
        if problem is not None:
            raise InvalidJob("options", *problem)
    ptxas: list[str] = []
    shown: list[str] = []  # the option each ptxas token came from
    for option, value in _values(options, _PTXAS_OPTIONS):
        parts = value.split(",") if comma_lists else [value]
        ptxas += parts
        shown += [option] * len(parts)
    problem = _ptxas_problem(ptxas)
    if problem is not None:
        token, why = problem
        raise InvalidJob("options", shown[ptxas.index(token)], f"(ptxas's {token!r}) {why}")
    for option, value in _values(options, _HOST_OPTIONS):
        for token in value.split(","):
            if token.startswith(_HOST_REFUSED):
                raise InvalidJob(
                    "options",
                    option,
                    f"refused: the host compiler's {token!r} reads a file; {_NOT_COVERED}",
                )


def reads_system_folders(options: Sequence[str]) -> bool:
    """Whether nvcc ``options`` name system header folders (``-isystem``, or the host
    compiler's), whose headers only ``-MD`` (not ``-MMD``) reports."""
    for option in options:
        if option.startswith(_SYSTEM_FOLDERS):
            return True
    return any(
        token.startswith(_HOST_SYSTEM)
        for _, value in _values(options, _HOST_OPTIONS)
        for token in value.split(",")
    )
