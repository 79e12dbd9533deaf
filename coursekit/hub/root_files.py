"""The hub's own files, as root: written whole and private from the start (``write_atomic``), a TOML file read with
its problems named (``load_toml``), and several problems listed in one message (``listed``). Every module of the hub
writes and reads its settings and state through these; this module imports nothing of the hub but its error."""
import contextlib
import os
import tempfile

from .errors import HubError


def write_atomic(path, text, mode=0o644):
    """``text`` to ``path`` whole (a temporary file renamed over it), the temporary file made with ``mode`` from the
    start: a file of root's alone is never readable by others, not even while it is written."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".")  # 0600, a new name
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load_toml(path, what):
    """The TOML file at ``path`` as a dict; a HubError that names the file and the line when it is not TOML."""
    import tomllib
    if not path or not os.path.isfile(path):
        raise HubError(f"no {what} at {path}")
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise HubError(f"{path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise HubError(f"{path} is not UTF-8 text") from None



def listed(problems):
    return problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n" + "\n".join(
        f"  - {p}" for p in problems)
