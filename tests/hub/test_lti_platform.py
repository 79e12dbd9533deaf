"""The LTI 1.3 test platform (lti_platform.py) against the specifications it follows, and against the tool the hub
will use: a real JupyterHub 6 with jupyterhub-ltiauthenticator's LTI13Authenticator, configured as its documentation
says, launched into by the platform over HTTP on 127.0.0.1.

What a launch into the bare authenticator shows (the hub's own checks must add the rest): a good launch logs the user
in and keeps the whole id_token (roles, context, deployment, the AGS endpoint) as their auth_state; a token signed by
another key, an expired token, a replayed nonce, an unknown issuer and an unknown client id are refused with a page
that says why; a deployment id or a role the course does not know is let in by the authenticator.
"""
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.parse

import jwt
import pytest
import requests
from cryptography.fernet import Fernet

from coursekit.hub.setup import PROXY, free_port
from lti_platform import (AGS_CLAIM, AGS_SCOPES, LTI, OTHER_DEPLOYMENT_ID, ROLES, Browser, LtiPlatform,
                          autosubmit_form)

HUB_API_TOKEN = secrets.token_hex(16)


# ------------------------------------------------------------------ the platform alone
@pytest.fixture(scope="module")
def lms():
    with LtiPlatform() as platform:
        platform.add_context("course-1", "ENC101", "Encoders and decoders")
        platform.add_user("student-7", "Ada", "Lovelace", "ada@uni.example")
        platform.enroll("student-7", "course-1", "Learner")
        yield platform


def test_the_key_set_verifies_the_platforms_tokens(lms):
    """The JWKS the platform serves holds its public key (RS256, a key id), and that key verifies what it signs."""
    keys = requests.get(lms.jwks_url, timeout=10).json()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256" and keys[0]["kid"] == lms.kid
    token = lms.id_token({"variant": None, "sub": "student-7", "context": "course-1", "link": "l1", "title": "t",
                          "target": "http://tool.invalid/"}, nonce="n-1")
    claims = jwt.decode(token, jwt.PyJWK(keys[0]).key, algorithms=["RS256"], audience=lms.client_id,
                        issuer=lms.issuer)
    assert jwt.get_unverified_header(token)["kid"] == lms.kid
    assert claims[LTI + "message_type"] == "LtiResourceLinkRequest" and claims[LTI + "version"] == "1.3.0"
    assert claims[LTI + "deployment_id"] == lms.deployment_id and claims[LTI + "roles"] == ROLES["Learner"]
    assert claims[LTI + "context"]["id"] == "course-1" and claims[LTI + "resource_link"]["id"] == "l1"
    assert claims[AGS_CLAIM] == {"scope": list(AGS_SCOPES), "lineitems": lms.lineitems_url("course-1")}
    assert (claims["sub"], claims["nonce"], claims["azp"]) == ("student-7", "n-1", lms.client_id)
    assert claims["iat"] <= time.time() < claims["exp"]


def test_the_authorization_endpoint_refuses_what_the_security_framework_forbids():
    """OIDC step 2 as the 1EdTech Security Framework writes it: the platform answers a proper authentication
    request with a page that POSTs id_token and state to the registered redirect URI, and refuses one without a
    nonce, with another response mode, with an unregistered redirect URI or for another user than the launch's."""
    with LtiPlatform() as lms:
        lms.add_context("c", "C", "C")
        lms.add_user("u1", "U", "One")
        lms.add_user("u2", "U", "Two")
        lms.register_tool("http://127.0.0.1:9/login", ["http://127.0.0.1:9/callback"])
        start = requests.get(lms.launch_url("u1", "c"), timeout=10)
        step1 = autosubmit_form(start.text)
        assert step1["action"] == "http://127.0.0.1:9/login" and step1["method"] == "post"
        assert {k: step1["fields"][k] for k in ("iss", "login_hint", "client_id", "lti_deployment_id")} == {
            "iss": lms.issuer, "login_hint": "u1", "client_id": lms.client_id, "lti_deployment_id": lms.deployment_id}
        good = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
                "client_id": lms.client_id, "redirect_uri": "http://127.0.0.1:9/callback", "login_hint": "u1",
                "lti_message_hint": step1["fields"]["lti_message_hint"], "state": "s-1", "nonce": "n-1"}
        step3 = autosubmit_form(requests.post(lms.authorize_url, data=good, timeout=10).text)
        assert step3["action"] == good["redirect_uri"] and step3["method"] == "post"
        assert step3["fields"]["state"] == "s-1"
        assert jwt.decode(step3["fields"]["id_token"], options={"verify_signature": False})["nonce"] == "n-1"
        for change, why in (({"nonce": ""}, "nonce is missing"), ({"response_mode": "query"}, "response_mode"),
                            ({"redirect_uri": "http://127.0.0.1:9/elsewhere"}, "redirect_uri is not registered"),
                            ({"login_hint": "u2"}, "login_hint is not the user")):
            answer = requests.post(lms.authorize_url, data={**good, **change}, timeout=10)
            assert answer.status_code == 400 and why in answer.json()["error"], change
        assert len(lms.issued) == 1


# ------------------------------------------------------------------ a real hub with the real authenticator
HUB_CONFIG = """
c = get_config()
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.pid_file = {state!r} + "/proxy.pid"
c.JupyterHub.db_url = "sqlite:///" + {state!r} + "/hub.sqlite"
c.JupyterHub.cookie_secret_file = {state!r} + "/cookie_secret"
c.JupyterHub.pid_file = {state!r} + "/hub.pid"
c.JupyterHub.authenticator_class = "ltiauthenticator.lti13.auth.LTI13Authenticator"
c.LTI13Authenticator.issuer = {issuer!r}
c.LTI13Authenticator.client_id = [{client_id!r}]
c.LTI13Authenticator.authorize_url = {authorize_url!r}
c.LTI13Authenticator.jwks_endpoint = {jwks_url!r}
c.LTI13Authenticator.username_key = "sub"
c.LTI13Authenticator.allow_all = True
c.Authenticator.enable_auth_state = True
c.JupyterHub.services = [{{"name": "lti-test", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "lti-test", "scopes": ["admin:users", "admin:auth_state"],
                            "services": ["lti-test"]}}]
"""


def wait_for(url, process, log, seconds=300):
    """Until ``url`` answers 200; the hub's log tail when ``process`` ends first or it takes more than ``seconds``
    (a hub starts in seconds on a quiet machine, and in more than a minute beside the rest of make test)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if requests.get(url, timeout=5).status_code == 200:  # the proxy answers 404 until the hub is routed
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    said = open(log, errors="replace").read()[-3000:]
    ended = f"the hub ended with {process.returncode}" if process.poll() is not None else f"not within {seconds} s"
    raise TimeoutError(f"{url}: {ended}; its log ends:\n{said}")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A platform with a course of three, and a JupyterHub 6 on 127.0.0.1 whose authenticator is ltiauthenticator's
    LTI13Authenticator, configured with the platform's issuer, client id, authorization URL and key set, as its
    documentation says (username: the sub claim; every authenticated user allowed; auth_state kept)."""
    if not os.access(PROXY, os.X_OK):
        pytest.fail(f"configurable-http-proxy is not installed at {PROXY}: run `make node` (make test does)")
    state = str(tmp_path_factory.mktemp("lti-hub"))
    port, hub_port, api_port = free_port(), free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    with LtiPlatform() as lms:
        lms.add_context("course-1", "ENC101", "Encoders and decoders")
        for sub, first, last, role in (("lti-student-1", "Ada", "Lovelace", "Learner"),
                                       ("lti-teacher-1", "Grace", "Hopper", "Instructor"),
                                       ("lti-ta-1", "Alan", "Turing", "TeachingAssistant")):
            lms.add_user(sub, first, last, f"{sub}@uni.example")
            lms.enroll(sub, "course-1", role)
        lms.register_tool(f"{url}/hub/lti13/oauth_login", [f"{url}/hub/lti13/oauth_callback"],
                          target_link_uri=f"{url}/hub/")
        config = os.path.join(state, "jupyterhub_config.py")
        with open(config, "w") as f:
            f.write(HUB_CONFIG.format(port=port, hub_port=hub_port, api_port=api_port, proxy=PROXY, state=state,
                                      issuer=lms.issuer, client_id=lms.client_id, authorize_url=lms.authorize_url,
                                      jwks_url=lms.jwks_url, token=HUB_API_TOKEN))
        env = {**os.environ, "JUPYTERHUB_CRYPT_KEY": Fernet.generate_key().decode()}
        with open(os.path.join(state, "hub.log"), "w") as log:
            process = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", config], cwd=state, env=env,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(f"{url}/hub/api", process, os.path.join(state, "hub.log"))
            yield lms, url, state
        finally:
            stop_hub(process, os.path.join(state, "proxy.pid"), port)


def stop_hub(process, proxy_pid_file, port):
    """Stop the hub this test started (its process group), then its proxy, which runs in a session of its own: the
    hub stops it on the way out, except when it is stopped before it has finished starting."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)
    try:
        proxy = int(open(proxy_pid_file).read())
        command = open(f"/proc/{proxy}/cmdline", "rb").read().split(b"\0")
        if b"--port" in command and command[command.index(b"--port") + 1] == str(port).encode():
            os.kill(proxy, signal.SIGTERM)  # this hub's proxy, not a process that has its id since
    except (OSError, ValueError, IndexError):
        pass  # gone already (or never started)


def launch(hub, sub, variant=None):
    """A browser launching from the platform as ``sub``: the platform's page, the hub's login initiation, the
    platform's authentication response POSTed to the hub's callback; stops at the hub's answer to the callback
    (its redirect into the hub, or its error page). Returns (the answer, the browser)."""
    lms, url, _ = hub
    browser = Browser(stop_at=lambda target: target.startswith(url) and "/lti13/" not in target)
    answer = browser.open(lms.launch_url(sub, "course-1", variant=variant))
    return answer, browser


def hub_user(hub, name):
    _, url, _ = hub
    answer = requests.get(f"{url}/hub/api/users/{name}", headers={"Authorization": f"token {HUB_API_TOKEN}"},
                          timeout=10)
    return answer.json() if answer.status_code == 200 else None


pipeline = pytest.mark.pipeline  # a real JupyterHub and its proxy


@pipeline
def test_a_good_launch_logs_the_user_in_with_the_launch_in_auth_state(hub):
    """A learner's launch goes platform -> hub login -> platform authorization -> hub callback, which logs them in
    (a session cookie, a redirect into the hub) as the sub claim, with the whole verified id_token as their
    auth_state: roles, context, deployment id, and the AGS endpoint that `course return --lms` will need."""
    lms, url, _ = hub
    answer, browser = launch(hub, "lti-student-1")
    assert answer.status_code == 302 and answer.headers["Location"].startswith("/hub/"), answer.text[:500]
    steps = [(method, urllib.parse.urlsplit(u).netloc, urllib.parse.urlsplit(u).path.rsplit("/", 1)[0] or "/")
             for method, u, _ in browser.history]
    platform, tool = urllib.parse.urlsplit(lms.base_url).netloc, urllib.parse.urlsplit(url).netloc
    assert steps == [("GET", platform, "/launch"), ("POST", tool, "/hub/lti13"), ("GET", platform, "/"),
                     ("POST", tool, "/hub/lti13")]
    assert [u.split("?")[0] for _, u, _ in browser.history][1:] == [
        f"{url}/hub/lti13/oauth_login", lms.authorize_url, f"{url}/hub/lti13/oauth_callback"]
    assert any(c.name.startswith("jupyterhub-session") for c in browser.cookies)
    user = hub_user(hub, "lti-student-1")
    state = user["auth_state"]
    assert state["sub"] == "lti-student-1" and state["iss"] == lms.issuer and state["aud"] == lms.client_id
    assert state[LTI + "roles"] == ROLES["Learner"]
    assert state[LTI + "context"]["id"] == "course-1" and state[LTI + "deployment_id"] == lms.deployment_id
    assert state[AGS_CLAIM]["lineitems"] == lms.lineitems_url("course-1")
    assert state["given_name"] == "Ada" and state["email"] == "lti-student-1@uni.example"


@pipeline
def test_an_instructor_and_a_ta_arrive_with_their_roles(hub):
    for sub, role in (("lti-teacher-1", "Instructor"), ("lti-ta-1", "TeachingAssistant")):
        answer, _ = launch(hub, sub)
        assert answer.status_code == 302, answer.text[:500]
        assert hub_user(hub, sub)["auth_state"][LTI + "roles"] == ROLES[role]


REFUSED = {  # variant: (status, what the hub's page says)
    "wrong_key": (400, "Signature verification failed"),
    "expired": (400, "Signature has expired"),
    "unknown_issuer": (400, "Invalid issuer"),
    "unknown_client_id": (401, "Audience doesn"),
}


@pipeline
@pytest.mark.parametrize("variant", sorted(REFUSED))
def test_a_bad_token_is_refused_with_a_page_that_says_why(hub, variant):
    """A token signed by another key, an expired one, one from an issuer or for a client id the hub is not
    configured with: the authenticator answers the callback with an error page naming the reason, and nobody is
    logged in."""
    status, why = REFUSED[variant]
    answer, browser = launch(hub, "lti-student-1", variant)
    assert answer.status_code == status and why in answer.text, answer.text[:800]
    assert answer.url.endswith("/hub/lti13/oauth_callback")
    assert not any(c.name.startswith("jupyterhub-session") for c in browser.cookies)


@pipeline
def test_a_replayed_nonce_and_a_replayed_response_are_refused(hub):
    """A token carrying the nonce of an earlier launch is refused (the nonce is bound to this browser's login);
    so is the earlier authentication response POSTed again as it was (its state was used up)."""
    lms, url, _ = hub
    good, _ = launch(hub, "lti-student-1")
    assert good.status_code == 302
    redirect_uri, fields = lms.last_response
    answer, _ = launch(hub, "lti-student-1", "replayed_nonce")
    assert answer.status_code == 400 and "nonce mismatch" in answer.text, answer.text[:800]
    again = Browser().post(redirect_uri, data=fields, allow_redirects=False)
    assert again.status_code == 400 and "state missing from cookies" in again.text, again.text[:800]


@pipeline
def test_the_bare_authenticator_lets_in_an_unknown_deployment_and_an_unknown_role(hub):
    """What the hub must check itself: ltiauthenticator 1.6.3 neither compares the deployment id with one it is
    configured with (it has no such setting) nor reads the roles, so these launches log the user in; the claims
    are in auth_state for the hub's check (a post_auth_hook or an authenticate override) to refuse."""
    answer, _ = launch(hub, "lti-ta-1", "unknown_deployment")
    assert answer.status_code == 302
    assert hub_user(hub, "lti-ta-1")["auth_state"][LTI + "deployment_id"] == OTHER_DEPLOYMENT_ID
    answer, _ = launch(hub, "lti-ta-1", "unknown_role")
    assert answer.status_code == 302
    assert hub_user(hub, "lti-ta-1")["auth_state"][LTI + "roles"] == ROLES["Mentor"]
