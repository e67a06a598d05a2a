"""Finding the CUDA toolkit: nvcc, NVRTC and the headers NVRTC compiles against.

Looked up once per process (:func:`find_toolkit` is cached) because autotuners call the
compiler thousands of times and TVM's own lookup spawns ``which nvcc`` on every compile.

nvcc is searched in this order, and every place tried is kept in ``Toolkit.searched``
so a missing compiler can be reported exactly:

1. ``$CUDA_PATH/bin/nvcc``, then ``$CUDA_HOME/bin/nvcc``
2. ``nvcc`` on ``$PATH``
3. ``/usr/local/cuda/bin/nvcc``
4. NVIDIA's pip wheels (``nvidia-cuda-nvcc``), found through ``cuda-pathfinder``

NVRTC is the library ``cuda.bindings.nvrtc`` loads (usually the ``nvidia-cuda-nvrtc``
wheel). Its include folders come from the toolkit root when one with headers was found
(``include``, ``targets/<triple>/include`` and its ``cccl`` folder, as TVM passes them),
else from the ``nvidia-cuda-runtime`` and ``nvidia-cuda-cccl`` wheels (the header
wheels). ``$ASYNCCOMP_CUDA_HEADERS=wheels`` takes the wheels' even where a toolkit root
has headers (when NVRTC, a wheel too, is newer than the toolkit); ``auto`` (the default)
is the order above.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ._include_identity import include_identity

if TYPE_CHECKING:
    from .backends import CompilerInfo

__all__ = (
    "HEADERS_ENV",
    "Toolkit",
    "ToolkitLocation",
    "discover_toolkit",
    "find_toolkit",
    "locate_toolkit",
    "target_triple",
    "tool_version",
    "toolkit_fingerprint",
    "wheel_include_dirs",
)

DEFAULT_ROOTS: tuple[str, ...] = ("/usr/local/cuda",)
#: Whose headers NVRTC compiles against: ``auto`` (the toolkit root's, else the header
#: wheels') or ``wheels`` (the header wheels', when installed).
HEADERS_ENV = "ASYNCCOMP_CUDA_HEADERS"


def target_triple() -> str:
    """The ``targets/<triple>`` folder name CUDA uses on this machine."""
    return "sbsa-linux" if platform.machine().lower() in ("aarch64", "arm64") else "x86_64-linux"


@dataclass(frozen=True)
class Toolkit:
    """What was found. Paths are absolute; ``None`` means not found."""

    nvcc: Path | None
    nvcc_version: str | None
    cuda_root: Path | None
    include_dirs: tuple[Path, ...]
    nvrtc_version: tuple[int, int] | None
    nvrtc_library: str | None
    searched: tuple[str, ...] = field(default=())
    nvrtc_error: str | None = None
    #: The architecture numbers each compiler supports (75, 80, 90, 100...); empty when
    #: they could not be asked.
    nvrtc_archs: tuple[int, ...] = ()
    nvcc_archs: tuple[int, ...] = ()
    #: Each registered backend's description of its compiler here (name, info), as it
    #: probed it when the toolkit was found (a compile server's, from its welcome), and
    #: the :func:`fields_digest` of the toolkit it described: a toolkit changed since
    #: (``dataclasses.replace``) is described anew.
    compilers: tuple[tuple[str, CompilerInfo], ...] = ()
    described_fields: str = ""

    def __hash__(self) -> int:
        # Hashed on every compile (the cache of fields_digest, through described()), and
        # frozen: its fields are hashed once, not each backend's CompilerInfo every time.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict[str, object]:
        # A string's hash differs between processes: the cached one never travels.
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    def described(self, backend: str) -> CompilerInfo | None:
        """Backend ``backend``'s description of its compiler here, if it was made (for
        this toolkit as it is)."""
        if not self.compilers or self.described_fields != fields_digest(self):
            return None
        return next((info for name, info in self.compilers if name == backend), None)

    def describe(self) -> str:
        """A human-readable report (``asynccomp doctor`` prints it)."""
        lines = [
            f"nvcc:          {self.nvcc or 'NOT FOUND'}",
            f"nvcc version:  {self.nvcc_version or '-'}",
            f"CUDA root:     {self.cuda_root or '-'}",
            f"NVRTC:         {self.nvrtc_library or 'NOT FOUND'}",
            f"NVRTC version: {'.'.join(map(str, self.nvrtc_version or ())) or '-'}",
        ]
        if self.nvrtc_error:
            lines.append(f"NVRTC error:   {self.nvrtc_error}")
        lines.append("NVRTC include folders:")
        lines += [f"  {d}" for d in self.include_dirs] or ["  (none found)"]
        lines.append("searched for nvcc:")
        lines += [f"  {s}" for s in self.searched]
        return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def fields_digest(toolkit: Toolkit) -> str:
    """A digest of what a toolkit says of itself, its compilers' descriptions left out
    (stable across processes: a welcome's toolkit is checked against it)."""
    parts = [
        repr(getattr(toolkit, f.name))
        for f in fields(toolkit)
        if f.name not in ("compilers", "described_fields")
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def tool_version(tool: Path, *, last_line: bool = False) -> str | None:
    """``13.0.88`` from a CUDA tool's ``--version`` (nvcc, ptxas: "release 13.0,
    V13.0.88"). Without that line: the output's last line if ``last_line`` (a build of
    nvcc that words it otherwise still has a version to show), else ``None``. Blocking."""
    try:
        out = subprocess.run(
            [str(tool), "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release [\d.]+, V([\d.]+)", out)
    if match:
        return match.group(1)
    lines = out.strip().splitlines()
    return lines[-1] if lines and last_line else None


def _root_of(nvcc: Path) -> Path | None:
    """The toolkit folder holding ``bin/nvcc``, following links and wrapper scripts."""
    root = nvcc.resolve().parent.parent
    if (root / "include" / "cuda_runtime.h").is_file():
        return root
    # A wrapper script such as /usr/local/bin/nvcc that execs the real one: read its target.
    try:
        text = nvcc.read_text(errors="replace")[:4096] if nvcc.stat().st_size < 4096 else ""
    except OSError:
        return None
    match = re.search(r"(/\S+)/bin/nvcc\b", text)
    if match and (Path(match.group(1)) / "include" / "cuda_runtime.h").is_file():
        return Path(match.group(1))
    return None


def _include_dirs_of_root(root: Path) -> list[Path]:
    target = root / "targets" / target_triple() / "include"
    dirs = [root / "include", target, target / "cccl"]
    if (root / "include" / "cccl").is_dir():
        dirs.append(root / "include" / "cccl")
    unique: dict[Path, Path] = {}
    for d in dirs:
        if d.is_dir():
            # include/ is often a link to targets/<triple>/include: pass each folder once.
            unique.setdefault(d.resolve(), d)
    return list(unique.values())


def wheel_include_dirs() -> list[Path]:
    """The include folders of the installed header wheels (``nvidia-cuda-runtime``,
    ``nvidia-cuda-cccl``), whether or not NVRTC uses them; empty when not installed."""
    return _wheel_include_dirs()


def _wheel_include_dirs() -> list[Path]:
    try:
        from cuda import pathfinder
    except ImportError:
        return []
    dirs: list[Path] = []
    for name in ("cudart", "cccl"):
        try:
            found = pathfinder.find_nvidia_header_directory(name)
        except Exception:  # pathfinder raises its own error types per platform
            found = None
        if found and Path(found) not in dirs:
            dirs.append(Path(found))
    return dirs


def _has_runtime_header(dirs: Sequence[Path]) -> bool:
    return any((d / "cuda_runtime.h").is_file() for d in dirs)


def _nvrtc_archs() -> tuple[int, ...]:
    try:
        from cuda.bindings import nvrtc

        err, archs = nvrtc.nvrtcGetSupportedArchs()
        return tuple(int(a) for a in archs) if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else ()
    except Exception:  # no NVRTC, or one without the call
        return ()


def _nvcc_archs(nvcc: Path) -> tuple[int, ...]:
    try:
        out = subprocess.run(
            [str(nvcc), "--list-gpu-code"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(sorted({int(n) for n in re.findall(r"\bsm_(\d+)", out)}))


def _nvrtc() -> tuple[tuple[int, int] | None, str | None, str | None]:
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None, None, f"nvrtcVersion failed: {err}"
    except Exception as exc:  # ImportError, or the library failing to load
        return None, None, f"{type(exc).__name__}: {exc}"
    library: str | None = None
    try:
        from cuda import pathfinder

        library = pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:
        library = "libnvrtc (loaded by cuda.bindings)"
    return (int(major), int(minor)), library, None


@dataclass(frozen=True)
class ToolkitLocation:
    """Where the toolkit is, found by file lookups alone (:func:`locate_toolkit`): what
    :class:`Toolkit` holds but the versions, which take running nvcc and loading NVRTC."""

    nvcc: Path | None
    cuda_root: Path | None
    include_dirs: tuple[Path, ...]
    searched: tuple[str, ...]


def _locate(
    env: Mapping[str, str], default_roots: Sequence[str], use_wheels: bool
) -> ToolkitLocation:
    """Where nvcc, the toolkit root and NVRTC's include folders are: file lookups only,
    nothing is run or loaded."""
    searched: list[str] = []
    nvcc: Path | None = None
    candidates: list[tuple[str, Path]] = []
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if env.get(var):
            candidates.append((f"${var}/bin/nvcc", Path(env[var]) / "bin" / "nvcc"))
        else:
            searched.append(f"${var} (not set)")
    on_path = shutil.which("nvcc", path=env.get("PATH", ""))
    if on_path:
        candidates.append(("nvcc on PATH", Path(on_path)))
    else:
        searched.append(f"nvcc on PATH={env.get('PATH', '')!r} (not found)")
    for root in default_roots:
        candidates.append((root, Path(root) / "bin" / "nvcc"))
    for label, path in candidates:
        if nvcc is None and path.is_file() and os.access(path, os.X_OK):
            nvcc = path.absolute()
            searched.append(f"{label}: {path} (found)")
        elif nvcc is None:
            searched.append(f"{label}: {path} (not found)")
    if nvcc is None and use_wheels:
        wheel_nvcc = None
        try:
            from cuda import pathfinder

            wheel_nvcc = pathfinder.find_nvidia_binary_utility("nvcc")
        except Exception:
            wheel_nvcc = None
        searched.append(f"nvidia-cuda-nvcc wheel: {wheel_nvcc or 'not found'}")
        if wheel_nvcc:
            nvcc = Path(wheel_nvcc)
    elif nvcc is None:
        searched.append("nvidia-cuda-nvcc wheel (not searched)")

    cuda_root = _root_of(nvcc) if nvcc is not None else None
    if cuda_root is None:
        for maybe_root in [env.get("CUDA_PATH"), env.get("CUDA_HOME"), *default_roots]:
            if maybe_root and (Path(maybe_root) / "include" / "cuda_runtime.h").is_file():
                cuda_root = Path(maybe_root)
                break
    include_dirs = _include_dirs_of_root(cuda_root) if cuda_root is not None else []
    headers = env.get(HEADERS_ENV, "").strip().lower() or "auto"
    if headers not in ("auto", "wheels"):
        from .errors import SettingsError

        raise SettingsError(
            HEADERS_ENV,
            env.get(HEADERS_ENV),
            "expected auto (the toolkit's headers, else the header wheels') or wheels",
        )
    if use_wheels and (headers == "wheels" or not _has_runtime_header(include_dirs)):
        wheels = _wheel_include_dirs()
        if _has_runtime_header(wheels) or not _has_runtime_header(include_dirs):
            include_dirs = wheels
        else:
            searched.append(f"${HEADERS_ENV}=wheels: no header wheels installed")
    return ToolkitLocation(nvcc, cuda_root, tuple(include_dirs), tuple(searched))


def discover_toolkit(
    environ: Mapping[str, str] | None = None,
    *,
    default_roots: Sequence[str] | None = None,
    use_wheels: bool = True,
) -> Toolkit:
    """Search for the toolkit now (uncached). ``environ`` defaults to ``os.environ``.

    Tests and unusual setups pass their own ``environ``/``default_roots`` to see what a
    machine without a toolkit looks like.
    """
    env = os.environ if environ is None else environ
    roots = DEFAULT_ROOTS if default_roots is None else default_roots
    found = _locate(env, roots, use_wheels)
    nvrtc_version, nvrtc_library, nvrtc_error = _nvrtc()
    toolkit = Toolkit(
        nvcc=found.nvcc,
        nvcc_version=tool_version(found.nvcc, last_line=True) if found.nvcc is not None else None,
        cuda_root=found.cuda_root,
        include_dirs=found.include_dirs,
        nvrtc_version=nvrtc_version,
        nvrtc_library=nvrtc_library,
        searched=found.searched,
        nvrtc_error=nvrtc_error,
        nvrtc_archs=_nvrtc_archs() if nvrtc_version is not None else (),
        nvcc_archs=_nvcc_archs(found.nvcc) if found.nvcc is not None else (),
    )
    from .backends import describe_compilers  # each backend probes its own compiler

    described = describe_compilers(toolkit)
    return replace(toolkit, compilers=described, described_fields=fields_digest(toolkit))


def _stat_of(path: Path | None) -> list[object]:
    if path is None:
        return [None]
    try:
        real = path.resolve()
        st = real.stat()
    except OSError:
        return [str(path), None]
    return [str(real), st.st_mtime_ns, st.st_size]


def _distribution_versions(names: Sequence[str]) -> list[object]:
    from importlib import metadata

    versions: list[object] = []
    for name in names:
        try:
            versions.append([name, metadata.version(name)])
        except metadata.PackageNotFoundError:
            versions.append([name, None])
    return versions


@functools.cache
def locate_toolkit() -> ToolkitLocation:
    """Where this process's toolkit is (cached): nvcc, the root, the include folders.
    A few milliseconds; nothing is run or loaded (``find_toolkit`` runs ``nvcc
    --version`` and loads NVRTC). What a process that only renders jobs, such as a TVM
    builder worker on the compile server, needs."""
    return _locate(os.environ, DEFAULT_ROOTS, True)


def toolkit_fingerprint() -> str:
    """See :func:`_fingerprint` (the registered backends read now: one's own may be
    registered later in the process)."""
    return _fingerprint(os.environ.get("ASYNCCOMP_BACKENDS", ""))


@functools.cache
def _fingerprint(backends: str) -> str:
    """A cheap sha256 of what decides which toolkit this process would compile with:
    nvcc's file, the include folders and their fingerprint, the NVRTC and header wheels
    installed, and the variables the search reads. Nothing is run or loaded (unlike
    :func:`find_toolkit`, which runs ``nvcc --version`` and loads NVRTC), so a process
    can find the compile server of its toolkit in a few milliseconds; an upgraded
    toolkit or wheel changes it."""
    found = locate_toolkit()
    parts = [
        _stat_of(found.nvcc),
        [str(d) for d in found.include_dirs],
        include_identity(found.include_dirs),
        _distribution_versions(
            ["cuda-bindings", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-cccl"]
        ),
        [os.environ.get(v) for v in ("CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH", HEADERS_ENV)],
        sys.prefix,
        _backend_fingerprints(),
    ]
    encoded = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()


def _backend_fingerprints() -> list[object]:
    """Each registered backend's own cheap fingerprint of its compiler (nvJitLink's
    package, say): a server compiles with the compilers of the processes that use it."""
    from .backends import backend_class, backend_names

    return [[name, backend_class(name).fingerprint()] for name in backend_names()]


@functools.cache
def find_toolkit() -> Toolkit:
    """The toolkit of this process, searched on first use and then remembered."""
    return discover_toolkit()
