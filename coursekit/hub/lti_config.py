"""The LTI file of ``course hub --lti`` (``read_lti_config``), the tool's key (``ensure_tool_key``) and the settings
the hub's authenticator reads (``write_settings``); coursekit/hub/lti.py, which uses them, says what the file holds."""
import json
import os
import re
import sys
from dataclasses import dataclass

from .root_files import write_atomic
from .access import HubError

LTI_KEYS = {"issuer", "client_id", "login_url", "token_url", "jwks_url", "deployment_ids", "tool_key",
            "username_claim", "username_prefix", "course"}
SETTINGS_FILE = "lti.json"


# ------------------------------------------------------------------ the LTI file
@dataclass
class LtiConfig:
    path: str
    issuer: str
    client_id: str
    login_url: str
    token_url: str
    jwks_url: str
    deployment_ids: list
    tool_key: str
    username_claim: str = "sub"
    username_prefix: str = ""
    courses: list = None  # the [[course]] tables, read by coursekit.hub.courses.read_courses


def url_or_none(value):
    return isinstance(value, str) and re.match(r"^https?://[^\s/]+", value) is not None


def read_lti_config(path):
    """The LTI file at ``path``; a HubError naming every problem (each key, what it must be, and where an
    administrator finds it in the README)."""
    from .root_files import load_toml
    data = load_toml(path, "LTI settings file")
    problems = []
    unknown = sorted(set(data) - LTI_KEYS)
    if unknown:
        problems.append(f"{path}: unknown key(s) {', '.join(unknown)} (it has {', '.join(sorted(LTI_KEYS))})")
    for key, what in (("issuer", "the platform's issuer (iss)"),
                      ("client_id", "the client id the platform gave the tool")):
        if not isinstance(data.get(key), str) or not data.get(key):
            problems.append(f"{path}: no {key} = \"...\" ({what})")
    for key, what in (("login_url", "the platform's OpenID Connect authorization URL"),
                      ("token_url", "the platform's OAuth 2 token URL (for grades)"),
                      ("jwks_url", "the platform's public key set URL")):
        if not url_or_none(data.get(key)):
            problems.append(f"{path}: {key} must be an http(s) URL: {what}")
    deployments = data.get("deployment_ids")
    if not isinstance(deployments, list) or not deployments or not all(isinstance(d, str) and d for d in deployments):
        problems.append(f"{path}: deployment_ids must list the deployment id(s) of the tool, e.g. [\"1:abc\"]")
    key = data.get("tool_key")
    if not isinstance(key, str) or not key:
        problems.append(f"{path}: no tool_key = \"...\" (the path of the tool's private key; made when missing)")
    claim = data.get("username_claim", "sub")
    if not (claim == "sub" or (isinstance(claim, str) and re.fullmatch(r"custom:[A-Za-z0-9_.-]+", claim))):
        problems.append(f"{path}: username_claim must be \"sub\" or \"custom:NAME\" (a custom parameter of the "
                        f"launch), not {claim!r}")
    prefix = data.get("username_prefix", "")
    if not isinstance(prefix, str) or (prefix and not re.fullmatch(r"[a-z_][a-z0-9_-]{0,15}", prefix)):
        problems.append(f"{path}: username_prefix must be up to 16 lowercase letters, digits, '_' or '-', starting "
                        f"with a letter or '_' (or \"\"), not {prefix!r}")
    if problems:
        from .root_files import listed
        raise HubError(listed(problems))
    base = os.path.dirname(os.path.abspath(path))
    return LtiConfig(os.path.abspath(path), data["issuer"], data["client_id"], data["login_url"], data["token_url"],
                     data["jwks_url"], list(deployments), os.path.normpath(os.path.join(base, key)), claim, prefix,
                     data.get("course"))


def ensure_tool_key(lti, state, out=print):
    """The tool's private key, root's alone: made when missing (its public key, which the administrator registers
    with the platform, printed and written to STATE/lti-tool-public-key.json); a HubError when others could read it
    or it is not a private key."""
    from ..lms.ags import generate_key, load_key, public_jwk, public_pem
    path = lti.tool_key
    if not os.path.lexists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        generate_key(path)
        out(f"made the tool's private key {path} (root's alone)")
    st = os.lstat(path)
    if not os.path.isfile(path) or os.path.islink(path) or st.st_uid != 0 or st.st_mode & 0o077:
        raise HubError(f"the tool's private key {path} must be a file of root's that nobody else may read: "
                       f"`chown root:root {path} && chmod 600 {path}`")
    try:
        key = load_key(path)
    except (ValueError, TypeError) as exc:
        raise HubError(f"{path} is not a PEM private key (tool_key): {exc}") from None
    public = {"jwk": public_jwk(key), "pem": public_pem(key)}
    write_atomic(os.path.join(state, "lti-tool-public-key.json"), json.dumps(public, indent=1), mode=0o644)
    out(f"the tool's public key (register it with the platform): {os.path.join(state, 'lti-tool-public-key.json')}")
    return public


def write_settings(state, lti, courses, exchange):
    """The authenticator's settings (root's alone); returns their path."""
    settings = {"deployment_ids": lti.deployment_ids, "username_claim": lti.username_claim,
                "username_prefix": lti.username_prefix, "state": state, "exchange": exchange,
                "python": sys.executable, "grading_config": os.path.join(state, "grading.json"),
                "configured": sorted({n for c in courses for n in c.instructors + c.students})}
    path = os.path.join(state, SETTINGS_FILE)
    write_atomic(path, json.dumps(settings, indent=1), mode=0o600)
    return path
