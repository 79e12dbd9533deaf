"""An LTI 1.3 platform for tests: an LMS on 127.0.0.1, written against the published specifications.

* LTI 1.3 Core (https://www.imsglobal.org/spec/lti/v1p3/): the resource link launch and its claims (message type,
  version, deployment id, target link, resource link, roles, context, the platform, custom).
* 1EdTech Security Framework 1.0 (https://www.imsglobal.org/spec/security/v1p0/): the OpenID Connect third-party
  initiated login (step 1: the platform sends the browser to the tool's login URL with ``iss``, ``login_hint``,
  ``target_link_uri``, ``lti_message_hint``, ``client_id``, ``lti_deployment_id``; step 2: the tool sends it back to
  the platform's authorization URL with ``scope=openid``, ``response_type=id_token``, ``response_mode=form_post``,
  ``prompt=none``, ``client_id``, ``redirect_uri``, ``login_hint``, ``lti_message_hint``, ``state``, ``nonce``;
  step 3: the platform answers with a page that POSTs ``id_token`` and ``state`` to the redirect URI), the platform's
  key set (JWKS), and the OAuth 2 client-credentials grant with a signed JWT client assertion (RFC 7523,
  ``private_key_jwt``) that gives a tool its access token for the services.
* Assignment and Grade Services 2.0 (https://www.imsglobal.org/spec/lti-ags/v2p0/): the endpoint claim in the launch,
  the line item service (list with ``resource_id`` / ``resource_link_id`` / ``tag`` filters, create, get) and the
  score publish service (``<line item>/scores``) and result service (``<line item>/results``), each behind the scope
  it needs.

The platform holds its own RSA key pair, serves its JWKS, signs every launch's ``id_token`` (RS256, with its key id)
and records every score it accepts (``scores``) and every request it refused (``refused``). It can be told to refuse
the scores of one user with 401, 404 or 422 (``refuse_scores``), and to make a bad launch (``VARIANTS``): a token
signed by another key, an expired token, a replayed nonce, an issuer or a client id the tool does not know, a
deployment id the tool does not know, a role the course does not know.

It runs in a thread (``with LtiPlatform() as lms:``). A real browser opens ``launch_url(...)``; ``Browser`` is a
``requests`` session that does what a browser does with the platform's self-submitting forms, for tests without
Chromium.
"""
import html
import json
import secrets
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timezone
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
CANVAS_SUBMISSION = "https://canvas.instructure.com/lti/submission"
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_LINEITEM_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
SCOPE_RESULT_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
AGS_SCOPES = (SCOPE_LINEITEM, SCOPE_LINEITEM_READONLY, SCOPE_RESULT_READONLY, SCOPE_SCORE)
# Names and Role Provisioning Services 2.0 (https://www.imsglobal.org/spec/lti-nrps/v2p0/)
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
MEMBERSHIP_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
NRPS_PAGE = 2  # members a page: small, so that a class of a few is paged as a large one is
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
RESULTS_TYPE = "application/vnd.ims.lis.v2.resultcontainer+json"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

# LIS roles (LTI 1.3 Core, appendix A.2): the context (membership) role decides, the institution role rides along
# as real platforms send it
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
INSTITUTION = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#"
ROLES = {
    "Instructor": [MEMBERSHIP + "Instructor", INSTITUTION + "Faculty"],
    "TeachingAssistant": ["http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
                          INSTITUTION + "Staff"],
    "Learner": [MEMBERSHIP + "Learner", INSTITUTION + "Student"],
    "Mentor": [MEMBERSHIP + "Mentor"],  # a parent or an observer: a role this course does not know
}
ACTIVITY_PROGRESS = ("Initialized", "Started", "InProgress", "Submitted", "Completed")
GRADING_PROGRESS = ("FullyGraded", "Pending", "PendingManual", "Failed", "NotReady")

#: the bad launches ``launch_url(..., variant=...)`` makes
VARIANTS = ("wrong_key", "expired", "replayed_nonce", "unknown_issuer", "unknown_client_id", "unknown_deployment",
            "unknown_role")
OTHER_ISSUER = "https://other-platform.invalid"
OTHER_CLIENT_ID = "client-id-of-another-tool"
OTHER_DEPLOYMENT_ID = "deployment-not-configured"


def public_jwk(private_key, kid):
    """The public half of an RSA key as a JWK for signatures (RS256) with key id ``kid``."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key()))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _now():
    return int(time.time())


def _iso(t):
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def _parse_time(value):
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def autosubmit_page(action, fields, method="post"):
    """An HTML page whose form sends ``fields`` to ``action`` at once (what a platform answers in OIDC steps 1 and
    3; the form's id, ``autosubmit``, is what ``Browser`` looks for)."""
    inputs = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(str(v))}">'
                     for k, v in fields.items() if v is not None)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Launching</title></head><body>'
            f'<form id="autosubmit" method="{method}" action="{html.escape(action)}">{inputs}'
            f'<noscript><button type="submit">Continue</button></noscript></form>'
            f'<script>document.getElementById("autosubmit").submit();</script></body></html>')


class Refused(Exception):
    def __init__(self, status, message, headers=None, body=None):
        super().__init__(message)
        self.status, self.message, self.headers, self.body = status, message, headers or {}, body


class LtiPlatform:
    """The platform. Configure it (``register_tool``, ``add_context``, ``add_user``, ``enroll``), then start it
    (a ``with`` block) and send browsers to ``launch_url(...)``."""

    def __init__(self, client_id="coursekit-hub", deployment_id="deployment-1", name="coursekit test LMS"):
        self.client_id, self.deployment_id, self.name = client_id, deployment_id, name
        self.key, self.kid = new_key(), "platform-key-" + uuid.uuid4().hex[:8]
        self.other_key = new_key()  # the wrong_key variant signs with it, under the platform's own key id
        self.guid = uuid.uuid4().hex
        self.tool = None
        self.users = {}        # sub: {"given_name", "family_name", "name", "email", "custom"}
        self.contexts = {}     # id: {"label", "title", "members": {sub: role}, "lineitems": [dict], "results": {}}
        self.scores = []       # every score accepted: {"context", "lineitem", **the score posted}
        self.refused = []      # every request refused: {"path", "status", "why", "userId"?}
        self.issued = []       # the claims of every id_token signed
        self.last_response = None  # (redirect_uri, {"id_token", "state"}) of the last authentication response
        self.clock_offset = 0      # seconds the platform's clock is ahead (+) or behind (-) the real time
        self.token_lifetime = 300  # seconds from iat to exp of an id_token (Moodle's: 60; Canvas's: 3600)
        self.nrps = True           # the platform offers the class list (Names and Role Provisioning Services)
        self.differences = False   # True: each class list carries a Link rel="differences" (NRPS 2.0 section 2.4.3)
        self.list_leaves_out = set()   # subs the full class list omits, as a platform's slip (differences keep them)
        self.refuse_differences = None  # an HTTP status: the differences link is answered with it
        self._changes = []         # (number, context id, sub, role): each membership change, numbered in order
        self._refuse_scores = {}   # sub: status
        self.refuse_above_maximum = False  # True: a scoreGiven above the scoreMaximum is refused (400), as a
        #                                    gradebook that allows no extra credit may (AGS itself allows it)
        self.moodle_timestamps = False  # True: a score not later than the one on record is refused, as Moodle does
        self._launches = {}        # lti_message_hint: the launch it started
        self._nonces = []          # nonces the platform has put into tokens, in order
        self._tokens = {}          # access token: (scopes, expiry)
        self._jtis = set()         # client assertion ids seen (a replayed assertion is refused)
        self._lock = threading.RLock()
        self._server = self._thread = None

    # ------------------------------------------------------------------ running
    def start(self):
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="lti-platform", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------------ what an administrator copies into the tool
    @property
    def issuer(self):
        return self.base_url

    @property
    def authorize_url(self):
        return self.base_url + "/auth"

    @property
    def jwks_url(self):
        return self.base_url + "/jwks"

    @property
    def token_url(self):
        return self.base_url + "/token"

    def lineitems_url(self, context_id):
        return f"{self.base_url}/ags/{urllib.parse.quote(context_id, safe='')}/lineitems"

    def jwks(self):
        return {"keys": [public_jwk(self.key, self.kid)]}

    # ------------------------------------------------------------------ configuration
    def register_tool(self, login_url, redirect_uris, public_jwks=None, jwks_url=None, target_link_uri=None):
        """The tool as an administrator registers it: its OIDC login URL, its redirect URIs, and its public key
        for the client credentials grant (a JWK, a list of them, or the URL of its key set)."""
        if isinstance(public_jwks, dict):
            public_jwks = [public_jwks]
        self.tool = {"login_url": login_url, "redirect_uris": list(redirect_uris), "jwks": public_jwks or [],
                     "jwks_url": jwks_url, "target_link_uri": target_link_uri or login_url}

    def add_context(self, context_id, label=None, title=None):
        self.contexts[context_id] = {"label": label or context_id, "title": title or context_id, "members": {},
                                     "lineitems": [], "results": {}, "inactive": set()}

    def add_assignment(self, context_id, link_id, title, maximum, due=None, custom=None):
        """An assignment made in the LMS that links the tool (Canvas: an External Tool assignment; Moodle: an
        External tool activity with grades): its own line item (label = its title, ``resourceLinkId`` = its link,
        no ``resourceId``), which a launch from ``link_id`` names in the AGS claim's ``lineitem``; ``due``: its
        due date (seconds since the epoch); ``custom``: the link's custom parameters (Moodle's activity "Custom
        parameters"), which its launches carry with the tool's in the custom claim. Returns the line item."""
        item = self._create_lineitem(context_id, {"label": title, "scoreMaximum": maximum, "resourceLinkId": link_id})
        self.contexts[context_id].setdefault("links", {})[link_id] = {"title": title, "lineitem": item["id"],
                                                                      "custom": dict(custom or {})}
        if due is not None:
            self.set_due(context_id, title, due)
        return item

    def set_due(self, context_id, label, due):
        """The due date of the assignment whose line item is labelled ``label`` (seconds since the epoch)."""
        item = next(i for i in self.contexts[context_id]["lineitems"] if i["label"] == label)
        self.contexts[context_id].setdefault("due", {})[item["id"]] = due

    def add_user(self, sub, given_name="", family_name="", email=None, custom=None):
        self.users[sub] = {"given_name": given_name, "family_name": family_name,
                           "name": f"{given_name} {family_name}".strip(), "email": email, "custom": custom or {}}

    def enroll(self, sub, context_id, role):
        """``sub`` in ``context_id`` as ``role``: Instructor, TeachingAssistant, Learner or Mentor."""
        assert role in ROLES, role
        self.contexts[context_id]["members"][sub] = role
        self._changed(context_id, sub, role)

    def unenroll(self, sub, context_id):
        """``sub`` out of ``context_id`` (their enrolment deleted): the class list no longer has them, and its
        differences give them as Deleted."""
        role = self.contexts[context_id]["members"].pop(sub)
        self.contexts[context_id]["inactive"].discard(sub)
        self._changed(context_id, sub, role)

    def _changed(self, context_id, sub, role):
        with self._lock:
            self._changes.append((len(self._changes) + 1, context_id, sub, role))

    def memberships_url(self, context_id):
        return f"{self.base_url}/nrps/{urllib.parse.quote(context_id, safe='')}/memberships"

    def set_inactive(self, sub, context_id, inactive=True):
        """``sub`` still enrolled in ``context_id`` but Inactive (a concluded or suspended enrolment): NRPS lists
        them with ``status: Inactive``."""
        (self.contexts[context_id]["inactive"].add if inactive else self.contexts[context_id]["inactive"].discard)(sub)
        self._changed(context_id, sub, self.contexts[context_id]["members"][sub])

    def _memberships(self, context_id, query):
        """NRPS 2.0 section 2.3: the context's members (status, name, given_name, family_name, email, user_id,
        roles), ``limit`` members a page with a ``Link: <...>; rel="next"`` header to the next page; ``role``
        filters by a role. With ``differences`` on, each page also links ``rel="differences"``: the same URL with
        ``since`` the number of the last membership change, which lists the members changed after it (section
        2.4.3), one no longer in the context as ``Deleted``."""
        context = self._context(context_id)
        since = int(query["since"]) if query.get("since", "").isdigit() else None
        if since is not None and self.refuse_differences:
            return self.refuse_differences, {"Content-Type": "application/json"}, json.dumps({"error": "refused"})
        with self._lock:
            changed = {sub: role for n, c, sub, role in self._changes if c == context_id and n > (since or 0)}
            latest = len(self._changes)
        members = []
        for sub, role in sorted(changed.items() if since is not None else context["members"].items()):
            user = self.users[sub]
            if sub not in context["members"]:
                members.append({"status": "Deleted", "user_id": sub, "roles": list(ROLES[role])})
                continue
            if since is None and sub in self.list_leaves_out:
                continue
            role = context["members"][sub]
            member = {"status": "Inactive" if sub in context["inactive"] else "Active", "user_id": sub,
                      "name": user["name"], "given_name": user["given_name"], "family_name": user["family_name"],
                      "roles": list(ROLES[role])}
            if user["email"]:
                member["email"] = user["email"]
            members.append(member)
        if "role" in query:
            members = [m for m in members if any(r.endswith("#" + query["role"]) or r == query["role"]
                                                 for r in m["roles"])]
        limit = int(query["limit"]) if query.get("limit", "").isdigit() and int(query["limit"]) > 0 else NRPS_PAGE
        start = int(query["from"]) if query.get("from", "").isdigit() else 0
        page = members[start:start + limit]
        headers, links = {"Content-Type": MEMBERSHIP_TYPE}, []
        if start + limit < len(members):
            rest = urllib.parse.urlencode({**query, "from": start + limit, "limit": limit})
            links.append(f'<{self.memberships_url(context_id)}?{rest}>; rel="next"')
        if self.differences:
            links.append(f'<{self.memberships_url(context_id)}?since={latest}>; rel="differences"')
        if links:
            headers["Link"] = ", ".join(links)
        body = {"id": self.memberships_url(context_id), "members": page,
                "context": {"id": context_id, "label": context["label"], "title": context["title"]}}
        return 200, headers, json.dumps(body)

    def refuse_scores(self, sub, status):
        """From now on answer a score for ``sub`` with ``status``: 401 (the token is refused), 404 (no such line
        item) or 422 (the platform cannot take it); None: accept again."""
        assert status in (401, 404, 422, None)
        with self._lock:
            if status is None:
                self._refuse_scores.pop(sub, None)
            else:
                self._refuse_scores[sub] = status

    # ------------------------------------------------------------------ launching
    def launch_url(self, sub, context_id, resource_link_id="resource-link-1", variant=None, target_link_uri=None,
                   title="Open the course"):
        """The URL a browser opens to launch the tool as ``sub`` from ``context_id`` (what clicking the link in the
        LMS does): a page that starts the third-party initiated login. ``variant``: one of ``VARIANTS``."""
        assert variant in (None, *VARIANTS), variant
        assert self.tool, "register_tool first"
        hint = secrets.token_urlsafe(16)
        with self._lock:
            self._launches[hint] = {"sub": sub, "context": context_id, "link": resource_link_id, "title": title,
                                    "variant": variant, "target": target_link_uri or self.tool["target_link_uri"]}
        return f"{self.base_url}/launch/{hint}"

    def course_page_url(self, sub, context_id, host="localhost", **kwargs):
        """The URL of the LMS's course page with the tool's link opened in it, as Canvas and Moodle open a link
        set to show embedded: the page frames the launch (an iframe whose document is the platform's launch page,
        which starts the login inside the frame). ``host``: the name the page is served under (``localhost``, so
        that the hub on 127.0.0.1 is framed by another site, as a hub is in a real LMS)."""
        url = self.launch_url(sub, context_id, **kwargs)
        hint = url.rsplit("/", 1)[1]
        with self._lock:
            self._launches[hint]["framed"] = True
        return f"http://{host}:{self._server.server_address[1]}/course/{hint}"

    def _course_page(self, hint):
        if hint not in self._launches:
            raise Refused(404, "no such launch")
        # Canvas's tool iframe: id tool_content, no sandbox, the allow list of canvas-lms's Lti::Launch.iframe_allowances
        frame = (f'<iframe id="tool_content" name="tool_content" title="{html.escape(self.name)}" '
                 f'src="{self.base_url}/launch/{hint}" style="width: 100%; height: 400px" '
                 f'allow="geolocation *; microphone *; camera *; midi *; encrypted-media *; autoplay *; '
                 f'clipboard-write *; display-capture *" allowfullscreen></iframe>')
        return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(self.name)}: course'
                f'</title></head><body><h1>Course</h1>{frame}</body></html>')

    def _login_initiation(self, hint):
        launch = self._launches.get(hint)
        if launch is None:
            raise Refused(404, "no such launch")
        variant = launch["variant"]
        fields = {"iss": OTHER_ISSUER if variant == "unknown_issuer" else self.issuer,
                  "login_hint": launch["sub"], "target_link_uri": launch["target"], "lti_message_hint": hint,
                  "client_id": OTHER_CLIENT_ID if variant == "unknown_client_id" else self.client_id,
                  "lti_deployment_id": OTHER_DEPLOYMENT_ID if variant == "unknown_deployment" else self.deployment_id}
        return autosubmit_page(self.tool["login_url"], fields)

    def _authenticate(self, args):
        """OIDC step 2 (the tool's authentication request) to step 3 (the response the browser POSTs to the tool)."""
        def need(name, value=None):
            if not args.get(name):
                raise Refused(400, f"invalid_request: {name} is missing")
            if value is not None and args[name] != value:
                raise Refused(400, f"invalid_request: {name} must be {value}, not {args[name]}")
        for name, value in (("scope", "openid"), ("response_type", "id_token"), ("response_mode", "form_post"),
                            ("prompt", "none"), ("client_id", None), ("redirect_uri", None), ("login_hint", None),
                            ("lti_message_hint", None), ("state", None), ("nonce", None)):
            need(name, value)
        launch = self._launches.get(args["lti_message_hint"])
        if launch is None:
            raise Refused(400, "invalid_request: lti_message_hint is not one this platform sent")
        if args["login_hint"] != launch["sub"]:
            raise Refused(400, "invalid_request: login_hint is not the user who launched")
        variant = launch["variant"]
        expected_client = OTHER_CLIENT_ID if variant == "unknown_client_id" else self.client_id
        if args["client_id"] != expected_client:
            raise Refused(400, "unauthorized_client: client_id is not the tool's")
        if args["redirect_uri"] not in self.tool["redirect_uris"]:
            raise Refused(400, "invalid_request: redirect_uri is not registered for the tool")
        with self._lock:
            nonce = args["nonce"]
            if variant == "replayed_nonce":
                if not self._nonces:
                    raise Refused(400, "replayed_nonce needs an earlier launch")
                nonce = self._nonces[-1]  # a nonce already delivered in an earlier launch
            else:
                self._nonces.append(nonce)
            token = self.id_token(launch, nonce)
            self.last_response = (args["redirect_uri"], {"id_token": token, "state": args["state"]})
        return autosubmit_page(args["redirect_uri"], {"id_token": token, "state": args["state"]})

    def id_token(self, launch, nonce):
        """The signed id_token of ``launch`` (a resource link launch), bent by the launch's variant."""
        variant, sub, context_id = launch["variant"], launch["sub"], launch["context"]
        user, context = self.users[sub], self.contexts[context_id]
        role = "Mentor" if variant == "unknown_role" else context["members"].get(sub, "Learner")
        now = _now() + self.clock_offset  # the platform's own clock
        claims = {
            "iss": OTHER_ISSUER if variant == "unknown_issuer" else self.issuer,
            "aud": OTHER_CLIENT_ID if variant == "unknown_client_id" else self.client_id,
            "azp": OTHER_CLIENT_ID if variant == "unknown_client_id" else self.client_id,
            "sub": sub,
            "iat": now - 3600 if variant == "expired" else now,
            "exp": now - 3000 if variant == "expired" else now + self.token_lifetime,
            "nonce": nonce,
            "name": user["name"], "given_name": user["given_name"], "family_name": user["family_name"],
            LTI + "message_type": "LtiResourceLinkRequest",
            LTI + "version": "1.3.0",
            LTI + "deployment_id": OTHER_DEPLOYMENT_ID if variant == "unknown_deployment" else self.deployment_id,
            LTI + "target_link_uri": launch["target"],
            LTI + "resource_link": {"id": launch["link"],
                                    "title": context.get("links", {}).get(launch["link"], {}).get("title",
                                                                                                  launch["title"])},
            LTI + "roles": list(ROLES[role]),
            LTI + "context": {"id": context_id, "label": context["label"], "title": context["title"],
                              "type": ["http://purl.imsglobal.org/vocab/lis/v2/course#CourseOffering"]},
            LTI + "tool_platform": {"guid": self.guid, "name": self.name,
                                    "product_family_code": "coursekit-test-platform", "version": "1"},
            LTI + "launch_presentation": {"document_target": "iframe" if launch.get("framed") else "window",
                                          "return_url": self.base_url + "/return"},
            LTI + "custom": {**user["custom"], **context.get("links", {}).get(launch["link"], {}).get("custom", {})},
            AGS_CLAIM: {"scope": list(AGS_SCOPES), "lineitems": self.lineitems_url(context_id)},
        }
        if self.nrps:  # NRPS 2.0 section 3.6.1: the service's claim in every launch of a context that offers it
            claims[NRPS_CLAIM] = {"context_memberships_url": self.memberships_url(context_id),
                                  "service_versions": ["2.0"]}
        if launch["link"] in context.get("links", {}):  # a link that is an LMS assignment: its own line item
            claims[AGS_CLAIM]["lineitem"] = context["links"][launch["link"]]["lineitem"]
        if user["email"]:
            claims["email"] = user["email"]
        key = self.other_key if variant == "wrong_key" else self.key
        self.issued.append({"variant": variant, "claims": claims})
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": self.kid})

    # ------------------------------------------------------------------ OAuth 2: client credentials, signed assertion
    def _tool_keys(self):
        if self.tool["jwks_url"]:
            return requests.get(self.tool["jwks_url"], timeout=10).json()["keys"]
        return self.tool["jwks"]

    def _token(self, args):
        if args.get("grant_type") != "client_credentials":
            raise Refused(400, "unsupported_grant_type", body={"error": "unsupported_grant_type"})
        if args.get("client_assertion_type") != ASSERTION_TYPE or not args.get("client_assertion"):
            raise Refused(401, "invalid_client: a signed JWT client assertion is needed",
                          body={"error": "invalid_client"})
        assertion = args["client_assertion"]
        try:
            kid = jwt.get_unverified_header(assertion).get("kid")
            keys = [k for k in self._tool_keys() if kid is None or k.get("kid") == kid]
            if not keys:
                raise jwt.InvalidTokenError(f"no key of the tool has the id {kid}")
            claims = jwt.decode(assertion, jwt.PyJWK(keys[0]).key, algorithms=["RS256"],
                                audience=[self.token_url, self.issuer], options={"require": ["exp", "iat", "jti"]})
        except jwt.PyJWTError as exc:
            raise Refused(401, f"invalid_client: {exc}", body={"error": "invalid_client",
                                                                "error_description": str(exc)})
        if claims.get("iss") != self.client_id or claims.get("sub") != self.client_id:
            raise Refused(401, "invalid_client: iss and sub must be the client id", body={"error": "invalid_client"})
        with self._lock:
            if claims["jti"] in self._jtis:
                raise Refused(401, "invalid_client: the assertion was used before", body={"error": "invalid_client"})
            self._jtis.add(claims["jti"])
            asked = args.get("scope", "").split()
            granted = [s for s in asked if s in AGS_SCOPES or (s == SCOPE_NRPS and self.nrps)]
            if not granted:
                raise Refused(400, "invalid_scope", body={"error": "invalid_scope"})
            token = secrets.token_urlsafe(24)
            self._tokens[token] = (set(granted), _now() + 3600)
        return {"access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": " ".join(granted)}

    def _authorize(self, headers, *scopes):
        """The scopes of the request's bearer token, which must hold one of ``scopes``."""
        auth = headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        granted, expiry = self._tokens.get(token, (None, 0))
        if granted is None or expiry < _now():
            raise Refused(401, "invalid_token", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        if not granted & set(scopes):
            raise Refused(403, "insufficient_scope", {"WWW-Authenticate": 'Bearer error="insufficient_scope"'})

    # ------------------------------------------------------------------ Assignment and Grade Services
    def _context(self, context_id):
        if context_id not in self.contexts:
            raise Refused(404, "no such context")
        return self.contexts[context_id]

    def _lineitem(self, context_id, n):
        items = self._context(context_id)["lineitems"]
        if not n.isdigit() or not 0 < int(n) <= len(items):
            raise Refused(404, "no such line item")
        return items[int(n) - 1]

    def line_items(self, context_id):
        return [dict(item) for item in self.contexts[context_id]["lineitems"]]

    def recorded(self, context_id, label):
        """{userId: (scoreGiven, scoreMaximum)} of the line item labelled ``label``: what the gradebook shows."""
        item = [i for i in self.contexts[context_id]["lineitems"] if i["label"] == label]
        if not item:
            return {}
        return {u: (r["scoreGiven"], r["scoreMaximum"])
                for u, r in self.contexts[context_id]["results"].get(item[0]["id"], {}).items()}

    def _list_lineitems(self, context_id, query):
        items = self._context(context_id)["lineitems"]
        for param, field in (("resource_id", "resourceId"), ("resource_link_id", "resourceLinkId"), ("tag", "tag")):
            if param in query:
                items = [i for i in items if i.get(field) == query[param]]
        if "limit" in query and query["limit"].isdigit():
            items = items[:int(query["limit"])]
        return items

    def _create_lineitem(self, context_id, body):
        context = self._context(context_id)
        label, maximum = body.get("label"), body.get("scoreMaximum")
        if not isinstance(label, str) or not label.strip():
            raise Refused(400, "a line item needs a label")
        if not isinstance(maximum, (int, float)) or isinstance(maximum, bool) or maximum <= 0:
            raise Refused(400, "a line item needs a scoreMaximum above 0")
        with self._lock:
            item = {k: body[k] for k in ("label", "scoreMaximum", "resourceId", "resourceLinkId", "tag",
                                         "startDateTime", "endDateTime") if k in body}
            item["id"] = f"{self.lineitems_url(context_id)}/{len(context['lineitems']) + 1}"
            context["lineitems"].append(item)
        return item

    def _score(self, context_id, n, body):
        context = self._context(context_id)
        user = body.get("userId") if isinstance(body, dict) else None
        with self._lock:
            status = self._refuse_scores.get(user)
        if status == 401:
            raise Refused(401, "invalid_token", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        if status == 404:
            raise Refused(404, "no such line item")
        item = self._lineitem(context_id, n)
        if status == 422:
            raise Refused(422, f"the platform cannot take a score for {user}")
        for name in ("userId", "timestamp", "activityProgress", "gradingProgress"):
            if not body.get(name):
                raise Refused(400, f"a score needs {name}")
        if body["activityProgress"] not in ACTIVITY_PROGRESS or body["gradingProgress"] not in GRADING_PROGRESS:
            raise Refused(400, "activityProgress or gradingProgress is not one the specification names")
        given, maximum = body.get("scoreGiven"), body.get("scoreMaximum")
        if given is not None and (not isinstance(given, (int, float)) or given < 0 or
                                  not isinstance(maximum, (int, float)) or maximum <= 0):
            raise Refused(400, "scoreGiven needs a number >= 0 and a scoreMaximum above 0")
        if self.refuse_above_maximum and given is not None and given > maximum:
            raise Refused(400, "scoreGiven is above scoreMaximum")
        try:
            when = _parse_time(body["timestamp"])
        except ValueError:
            raise Refused(400, "timestamp is not ISO 8601")
        if user not in context["members"]:
            raise Refused(422, f"{user} is not in the context")
        submitted_at = self._submitted_at(body)
        with self._lock:
            results = context["results"].setdefault(item["id"], {})
            last = results.get(user) or {}
            # AGS: never update a result with an older score (Canvas: strictly older); Moodle's gradebookservices
            # (mod/lti/service/gradebookservices/classes/local/resources/scores.php) also refuses an equal one
            if last and (last["when"] >= when if self.moodle_timestamps else last["when"] > when):
                raise Refused(409, "Refusing score with an earlier timestamp")
            results[user] = {"scoreGiven": given, "scoreMaximum": maximum, "when": when,
                             "comment": body.get("comment"),
                             **{k: last[k] for k in ("submitted_at", "late", "attempts") if k in last}}
            if submitted_at is not None:  # the submission Canvas makes (submit_homework), dated as Canvas dates it
                due = context.get("due", {}).get(item["id"])
                results[user].update(submitted_at=submitted_at, late=due is not None and submitted_at > due,
                                     attempts=last.get("attempts", 0) + 1)
            self.scores.append({"context": context_id, "lineitem": item["id"], **body})

    def _submitted_at(self, body):
        """When Canvas dates the submission a score makes (canvas-lms app/controllers/lti/ims/scores_controller.rb):
        a score is a new submission unless its submission extension says ``new_submission: false`` or
        ``submission_type: none``; dated by the extension's ``submitted_at`` when given (400 when it is no ISO 8601
        time or over a minute in the future), else at the moment of posting. None: no submission."""
        ext = body.get(CANVAS_SUBMISSION) if isinstance(body.get(CANVAS_SUBMISSION), dict) else {}
        if ext.get("new_submission") is False or ext.get("submission_type") == "none":
            return None
        if not ext.get("submitted_at"):
            return _now()
        try:
            when = _parse_time(ext["submitted_at"])
        except (ValueError, AttributeError):
            raise Refused(400, f"Provided submitted_at timestamp of {ext['submitted_at']} not a valid timestamp")
        if when > _now() + 60:
            raise Refused(400, f"Provided submitted_at timestamp of {ext['submitted_at']} in the future")
        return when

    def late(self, context_id, label):
        """{userId: True/False} of the line item labelled ``label``: whether its submission is late, as Canvas
        decides it (its time after the assignment's due date; canvas-lms DataFixup::InitializeSubmissionLateness:
        ``assignments.due_at < submissions.submitted_at``)."""
        item = next(i for i in self.contexts[context_id]["lineitems"] if i["label"] == label)
        return {u: r["late"] for u, r in self.contexts[context_id]["results"].get(item["id"], {}).items()
                if "late" in r}

    def _results(self, context_id, n, query):
        item = self._lineitem(context_id, n)
        results = self._context(context_id)["results"].get(item["id"], {})
        out = [{"id": f"{item['id']}/results/{urllib.parse.quote(u)}", "scoreOf": item["id"], "userId": u,
                "resultScore": r["scoreGiven"], "resultMaximum": r["scoreMaximum"], "comment": r["comment"]}
               for u, r in results.items() if "user_id" not in query or query["user_id"] == u]
        return out

    # ------------------------------------------------------------------ HTTP
    def handle(self, method, path, query, headers, body):
        """(status, headers, body) for one request; every refusal is recorded."""
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        try:
            if method == "GET" and parts[0] == "launch" and len(parts) == 2:
                return 200, {"Content-Type": "text/html; charset=utf-8"}, self._login_initiation(parts[1])
            if method == "GET" and parts[0] == "course" and len(parts) == 2:
                return 200, {"Content-Type": "text/html; charset=utf-8"}, self._course_page(parts[1])
            if parts == ["auth"] and method in ("GET", "POST"):
                args = dict(query)
                if method == "POST":
                    args.update(_form(body))
                return 200, {"Content-Type": "text/html; charset=utf-8"}, self._authenticate(args)
            if parts == ["jwks"] and method == "GET":
                return 200, {"Content-Type": "application/json"}, json.dumps(self.jwks())
            if parts == ["token"] and method == "POST":
                return 200, {"Content-Type": "application/json", "Cache-Control": "no-store"}, json.dumps(
                    self._token(_form(body)))
            if parts[0] == "nrps" and len(parts) == 3 and parts[2] == "memberships" and method == "GET":
                if not self.nrps:
                    raise Refused(404, "this platform offers no Names and Role Provisioning Services")
                self._authorize(headers, SCOPE_NRPS)
                return self._memberships(parts[1], query)
            if parts[0] == "ags" and len(parts) >= 3 and parts[2] == "lineitems":
                return self._ags(method, parts[1], parts[3:], query, headers, body)
            raise Refused(404, "not found")
        except Refused as refusal:
            record = {"method": method, "path": path, "status": refusal.status, "why": refusal.message}
            payload = _json_or_none(body)
            if isinstance(payload, dict) and "userId" in payload:
                record["userId"] = payload["userId"]
            with self._lock:
                self.refused.append(record)
            out = refusal.body if refusal.body is not None else {"error": refusal.message}
            return refusal.status, {"Content-Type": "application/json", **refusal.headers}, json.dumps(out)

    def _ags(self, method, context_id, rest, query, headers, body):
        if not rest:
            if method == "GET":
                self._authorize(headers, SCOPE_LINEITEM, SCOPE_LINEITEM_READONLY)
                return 200, {"Content-Type": LINEITEMS_TYPE}, json.dumps(self._list_lineitems(context_id, query))
            if method == "POST":
                self._authorize(headers, SCOPE_LINEITEM)
                _content_type(headers, LINEITEM_TYPE)
                item = self._create_lineitem(context_id, _json(body))
                return 201, {"Content-Type": LINEITEM_TYPE, "Location": item["id"]}, json.dumps(item)
        elif len(rest) == 1 and method == "GET":
            self._authorize(headers, SCOPE_LINEITEM, SCOPE_LINEITEM_READONLY)
            return 200, {"Content-Type": LINEITEM_TYPE}, json.dumps(self._lineitem(context_id, rest[0]))
        elif len(rest) == 2 and rest[1] == "scores" and method == "POST":
            self._authorize(headers, SCOPE_SCORE)
            _content_type(headers, SCORE_TYPE)
            self._score(context_id, rest[0], _json(body))
            return 204, {}, ""
        elif len(rest) == 2 and rest[1] == "results" and method == "GET":
            self._authorize(headers, SCOPE_RESULT_READONLY)
            return 200, {"Content-Type": RESULTS_TYPE}, json.dumps(self._results(context_id, rest[0], query))
        raise Refused(405 if method not in ("GET", "POST") else 404, "not a service of this platform")


def _form(body):
    return {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True).items()}


def _json_or_none(body):
    try:
        return json.loads(body or b"null")
    except ValueError:
        return None


def _json(body):
    value = _json_or_none(body)
    if not isinstance(value, dict):
        raise Refused(400, "the body is not a JSON object")
    return value


def _content_type(headers, expected):
    if headers.get("Content-Type", "").split(";")[0].strip() != expected:
        raise Refused(415, f"the body must be {expected}")


def _handler(platform):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self, method):
            url = urllib.parse.urlsplit(self.path)
            query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, text = platform.handle(method, url.path, query, self.headers, body)
            data = text.encode("utf-8")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._serve("GET")

        def do_POST(self):
            self._serve("POST")

        def do_PUT(self):
            self._serve("PUT")

        def do_DELETE(self):
            self._serve("DELETE")

        def log_message(self, *args):  # quiet: the platform records what it refused
            pass
    return Handler


# ------------------------------------------------------------------ a browser without a browser
class _Forms(HTMLParser):
    def __init__(self):
        super().__init__()
        self.forms, self._form = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self._form = {"id": attrs.get("id"), "action": attrs.get("action", ""),
                          "method": (attrs.get("method") or "get").lower(), "fields": {}}
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None and attrs.get("name"):
            self._form["fields"][attrs["name"]] = attrs.get("value", "")

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None


def autosubmit_form(page):
    """The self-submitting form of ``page`` (the platform's), or None."""
    parser = _Forms()
    parser.feed(page)
    return next((f for f in parser.forms if f["id"] == "autosubmit"), None)


class Browser(requests.Session):
    """A ``requests`` session that does what a browser does with the platform's pages: it submits each
    self-submitting form, follows redirects and keeps cookies. ``open(url)`` returns the first response that is not
    such a page, and ``history`` lists (method, URL, status) of every request on the way."""

    def __init__(self, max_steps=20, stop_at=None):
        super().__init__()
        self.max_steps, self.stop_at, self.history = max_steps, stop_at, []
        self.headers["Sec-Fetch-Dest"] = "document"  # what a browser says of a window's own navigation
        self.hooks["response"].append(lambda r, *a, **k: self.history.append((r.request.method, r.url,
                                                                              r.status_code)))

    def open(self, url):
        """Open ``url``; follow the self-submitting forms (and, unless ``stop_at(url)`` says so, the redirects)."""
        response = self.get(url, allow_redirects=False)
        for _ in range(self.max_steps):
            if response.is_redirect:
                target = urllib.parse.urljoin(response.url, response.headers["Location"])
                if self.stop_at and self.stop_at(target):
                    return response
                response = self.get(target, allow_redirects=False)
                continue
            form = autosubmit_form(response.text) if "html" in response.headers.get("Content-Type", "") else None
            if form is None:
                return response
            action = urllib.parse.urljoin(response.url, form["action"])
            if form["method"] == "post":
                response = self.post(action, data=form["fields"], allow_redirects=False)
            else:
                response = self.get(action, params=form["fields"], allow_redirects=False)
        raise RuntimeError(f"more than {self.max_steps} steps: {self.history}")

