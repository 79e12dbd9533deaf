"""Grades to the LMS by LTI Advantage's Assignment and Grade Services (AGS 2.0).

Where the platform grants AGS at launch, its launch carries the endpoint claim
(``https://purl.imsglobal.org/spec/lti-ags/claim/endpoint``) with the context's line items URL. With it and the tool's
credentials (``ToolCredentials``: the client id the platform gave the tool, the tool's private key, whose public half
the administrator registered with the platform, and the platform's token URL), ``post_assignment`` does for one
assignment:

1. an access token: the OAuth 2 client-credentials grant with a JWT client assertion signed by the tool's key
   (RFC 7523, ``private_key_jwt``; 1EdTech Security Framework 1.0 section 4.1), for the line item and score scopes;
2. the assignment's line item, the LMS's own column when it has one: the ``lineitem`` that launches from an LMS
   assignment's link made for the assignment brought (AGS's endpoint claim; the hub keeps it per resource link with
   the assignment the link's custom parameter ``assignment`` names, never read from its title), unless the line
   item's ``resourceId`` names another assignment; else the context's line item whose ``resourceId`` is the
   assignment and whose ``tag`` is this context's (untagged: only one this context's log shows the tool made or
   posted to, as a course copy carries last term's), else a new
   one (``label`` = the assignment, ``scoreMaximum`` = its maximum points, ``resourceId`` = the assignment). A line
   item that only shares the assignment's label is never written: another tool's column, last year's (its
   ``resourceId`` ``03_softmax-2023``) or a column the instructor made by hand would take scores that are not its
   own. It is passed over and named (``PostResult.passed_over``, and the log);
3. each student's score, posted once (``scoreGiven`` their points, ``scoreMaximum`` the assignment's,
   ``activityProgress`` Completed, ``gradingProgress`` FullyGraded, ``userId`` = the student's LMS user id, the
   ``sub`` of their launches), ``timestamp`` the time of posting (AGS: when the tool changed the score; Moodle's
   gradebookservices refuses a timestamp not later than the grade it holds), and the time the student submitted
   in Canvas's submission extension (``https://canvas.instructure.com/lti/submission`` ``submitted_at``), which
   Canvas takes as the submission's time (canvas-lms app/controllers/lti/ims/scores_controller.rb: without it the
   submission is dated when the score is posted, so every score returned after the due date would be marked late
   and the late policy would deduct again), with ``new_submission`` false when that submission was posted before
   (each new submission is an attempt in Canvas, which an assignment may limit).

Every line item found or created and every score posted or refused is appended to a log (JSON lines). A refusal
(401, 404, 422, or anything else) names the student and the others are still posted; a 401 is tried once more with
a fresh token first (a token can expire in a long class). The result says who was posted, who failed and why, and
who had no submission (posted 0, as the export files give them: one rule); ``course return A --lms`` exits non-zero
when one failed.
"""
import base64
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ..words import counted
from .cells import user_id
from .links import OffSite, next_page

AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_LINEITEM_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_RESULT_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"
RESULTS_TYPE = "application/vnd.ims.lis.v2.resultcontainer+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
CANVAS_SUBMISSION = "https://canvas.instructure.com/lti/submission"  # Canvas's score extension
TIMEOUT = 30  # seconds for one request to the platform
ASSERTION_BACKDATE = 60  # seconds a client assertion is dated back (a platform clock behind ours)
MOST_PAGES = 1000  # a platform that pages for ever is not followed for ever


class AgsError(Exception):
    """The platform refused a request (``status``: its HTTP status, 0 when it could not be reached)."""

    def __init__(self, status, message):
        super().__init__(f"{status or 'no answer'}: {message}" if status else message)
        self.status, self.message = status, message


# ------------------------------------------------------------------ the tool's key
def generate_key(path, kid=None):
    """A new RSA key for the tool at ``path`` (PEM, readable by its owner alone); returns its public JWK, what the
    administrator registers with the platform (Canvas: the developer key's Public JWK; Moodle: the tool's Public
    key type "RSA key" takes ``public_pem``)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return public_jwk(key, kid or key_id(key))


def load_key(path_or_pem):
    """The tool's private key from a PEM file or PEM bytes."""
    pem = path_or_pem if isinstance(path_or_pem, bytes) else open(path_or_pem, "rb").read()
    return serialization.load_pem_private_key(pem, password=None)


def key_id(private_key):
    """A stable key id: the RFC 7638 thumbprint of the public key."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key()))
    thumb = json.dumps({k: jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(thumb.encode()).digest()).rstrip(b"=").decode()


def public_jwk(private_key, kid=None):
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key()))
    return {**jwk, "kid": kid or key_id(private_key), "alg": "RS256", "use": "sig"}


def public_pem(private_key):
    return private_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo).decode()


@dataclass
class ToolCredentials:
    """What the tool presents to the platform's token endpoint."""
    client_id: str
    private_key: object          # a cryptography RSA private key (load_key)
    token_url: str
    kid: str = None               # the key id registered with the platform (default: the key's thumbprint)
    audience: str = None          # the assertion's aud (default: the token URL, as Canvas and Moodle expect)

    def assertion(self, lifetime=300):
        """The signed JWT client assertion: iss = sub = the client id, aud = the token endpoint, a fresh jti."""
        now = int(time.time())
        # issued a minute back: a platform whose clock runs behind (Moodle's token.php checks iat with no leeway)
        # must not see it as issued in the future
        claims = {"iss": self.client_id, "sub": self.client_id, "aud": self.audience or self.token_url,
                  "iat": now - ASSERTION_BACKDATE, "exp": now + lifetime, "jti": uuid.uuid4().hex}
        return jwt.encode(claims, self.private_key, algorithm="RS256",
                          headers={"kid": self.kid or key_id(self.private_key)})


# ------------------------------------------------------------------ HTTP
def http_request(method, url, *, data=None, headers=None, timeout=TIMEOUT):
    """(status, headers, body bytes); an HTTP error is an answer too. Only http(s) URLs are followed."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise AgsError(0, f"not an http(s) URL: {url!r}")
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        raise AgsError(0, f"the platform did not answer at {url}: {getattr(exc, 'reason', exc)}")


def refusal_text(status, body):
    """What a refusal said, short and plain."""
    try:
        data = json.loads(body)
        text = data.get("error_description") or data.get("error") or data.get("message") or data
        if isinstance(text, (dict, list)):
            text = json.dumps(text)
    except (ValueError, AttributeError):
        text = body.decode("utf-8", "replace")
    text = re.sub(r"\s+", " ", str(text)).strip()
    return f"HTTP {status}" + (f": {text[:200]}" if text else "")


def access_token(credentials, scopes, timeout=TIMEOUT):
    """An access token for ``scopes`` by the client credentials grant with a signed assertion."""
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
                                   "client_assertion": credentials.assertion(), "scope": " ".join(scopes)})
    status, _, body = http_request("POST", credentials.token_url, data=form.encode(), timeout=timeout,
                               headers={"Content-Type": "application/x-www-form-urlencoded",
                                        "Accept": "application/json"})
    if status != 200:
        raise AgsError(status, f"the platform refused the tool an access token ({refusal_text(status, body)})")
    try:
        token = json.loads(body)["access_token"]
    except (ValueError, KeyError, TypeError):
        raise AgsError(status, "the token endpoint's answer holds no access_token")
    return token


def scores_url(lineitem_url):
    """The line item's score service: ``/scores`` after its path, its query kept (AGS 2.0 section 3.4)."""
    parts = urllib.parse.urlsplit(lineitem_url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


class AgsClient:
    """The line item and score services of one context (its ``lineitems`` URL)."""
    SCOPES = (SCOPE_LINEITEM, SCOPE_LINEITEM_READONLY, SCOPE_SCORE)

    def __init__(self, lineitems_url, credentials, timeout=TIMEOUT):
        self.lineitems_url, self.credentials, self.timeout = lineitems_url, credentials, timeout
        self._token = None

    def token(self, fresh=False):
        if fresh or self._token is None:
            self._token = access_token(self.credentials, self.SCOPES, self.timeout)
        return self._token

    def _call(self, method, url, body=None, content_type=None, accept=None):
        def once(fresh):
            headers = {"Authorization": f"Bearer {self.token(fresh)}"}
            if content_type:
                headers["Content-Type"] = content_type
            if accept:
                headers["Accept"] = accept
            data = json.dumps(body).encode() if body is not None else None
            return http_request(method, url, data=data, headers=headers, timeout=self.timeout)
        status, headers, data = once(False)
        if status == 401:  # the token may have expired: once more with a fresh one
            status, headers, data = once(True)
        return status, headers, data

    def line_items(self, **filters):
        """The context's line items (``resource_id=``, ``resource_link_id=``, ``tag=`` filter them, as AGS
        defines; pages are followed)."""
        url = self.lineitems_url
        if filters:
            split = urllib.parse.urlsplit(url)
            query = urllib.parse.parse_qsl(split.query) + sorted(filters.items())
            url = urllib.parse.urlunsplit(split._replace(query=urllib.parse.urlencode(query)))
        items, first, pages = [], url, 0
        while url and pages < MOST_PAGES:
            status, headers, body = self._call("GET", url, accept=LINEITEMS_TYPE)
            if status != 200:
                raise AgsError(status, f"the platform refused its line items ({refusal_text(status, body)})")
            page = json.loads(body)
            items.extend(page if isinstance(page, list) else [])
            try:  # a list read in part would make a second column of one the tool has
                url, pages = next_page(headers, url, first), pages + 1
            except OffSite as exc:
                raise AgsError(status, f"the line items: {exc}")
        if url:
            raise AgsError(200, f"the line items go on past {MOST_PAGES} pages")
        return items

    def line_item(self, url):
        """The line item at ``url`` (an LMS assignment's, from a launch), or None when the platform has none there."""
        status, _, body = self._call("GET", url, accept=LINEITEM_TYPE)
        try:
            item = json.loads(body) if status == 200 else None
        except ValueError:
            item = None
        return item if isinstance(item, dict) and item.get("id") else None

    def find_or_create_line_item(self, assignment, maximum, resource_link_id=None, known=(), passed_over=None,
                                 tag=None, ours=()):
        """(line item, created): the first of ``known`` (line item URLs that launches from links made for
        ``assignment`` brought) that the platform has, unless it says it is another's (its ``resourceId`` another
        assignment); else the one whose resourceId is ``assignment`` and whose ``tag`` is ``tag`` (this context's:
        a line item a course copy carried from last term's course has last term's), or, untagged (made before the
        tool tagged), one this context's log shows the tool made or wrote (``ours``: line item URLs): a copied
        untagged one was last term's; else a new one (tagged ``tag``). A line item labelled ``assignment`` that is
        none of these is never taken: it is added to ``passed_over`` (a list, when given)."""
        passed = [] if passed_over is None else passed_over
        for url in known:
            item = self.line_item(url)
            if item is not None and item.get("resourceId") in (None, "", assignment):
                return item, False
            if item is not None:
                passed.append(item)
        ours = set(ours)

        def own(i):
            if not tag:
                return True
            return i["tag"] == tag if i.get("tag") else i.get("id") in ours

        found = [i for i in self.line_items(resource_id=assignment) if i.get("resourceId") == assignment and own(i)]
        if found:
            return found[0], False
        if passed_over is not None:
            taken = {i.get("id") for i in passed}
            passed += [i for i in self.line_items() if str(i.get("label", "")).strip() == assignment
                       and i.get("id") not in taken]
        item = {"label": assignment, "scoreMaximum": maximum, "resourceId": assignment, **({"tag": tag} if tag else {})}
        if resource_link_id:
            item["resourceLinkId"] = resource_link_id
        status, _, body = self._call("POST", self.lineitems_url, item, content_type=LINEITEM_TYPE,
                                     accept=LINEITEM_TYPE)
        if status not in (200, 201):
            raise AgsError(status, f"the platform refused to create the line item {assignment} ({refusal_text(status, body)})")
        created = json.loads(body)
        if not isinstance(created, dict) or not created.get("id"):
            raise AgsError(status, f"the platform created the line item {assignment} but gave no id")
        return created, True

    def results(self, lineitem_url):
        """{userId: resultScore / resultMaximum} the platform holds on the line item (AGS's result service, with a
        token of its own for the result scope), or None when it will not say (a registration without that scope,
        a refusal, an answer that is no result list): then every score is posted, as before."""
        try:
            token = access_token(self.credentials, [SCOPE_RESULT_READONLY], self.timeout)
        except AgsError:
            return None
        split = urllib.parse.urlsplit(lineitem_url)
        url = urllib.parse.urlunsplit(split._replace(path=split.path.rstrip("/") + "/results"))
        held, pages, first = {}, 0, url
        while url and pages < MOST_PAGES:
            status, headers, body = http_request("GET", url, timeout=self.timeout, headers={
                "Authorization": f"Bearer {token}", "Accept": RESULTS_TYPE})
            try:
                page = json.loads(body) if status == 200 else None
            except ValueError:
                page = None
            if not isinstance(page, list):
                return None
            for r in page:
                score, most = (r.get("resultScore"), r.get("resultMaximum")) if isinstance(r, dict) else (None, None)
                uid = user_id(r.get("userId")) if isinstance(r, dict) else None  # an older Canvas's JSON numbers
                if uid is not None and _number(score) and _number(most) and most > 0:
                    held[uid] = score / most
            try:
                url, pages = next_page(headers, url, first), pages + 1
            except OffSite:
                return None  # the scores held cannot all be read: every score is posted
        return None if url else held

    def post_score(self, lineitem_url, user_id, given, maximum, timestamp, submitted_at=None, new_submission=True):
        """POST one score (``timestamp``: now, when the tool changed it; ``submitted_at``: when the student
        submitted, Canvas's extension, with ``new_submission`` false when that submission was posted before);
        returns (status, why) -- why is None when the platform took it."""
        score = {"userId": user_id, "scoreGiven": given, "scoreMaximum": maximum, "timestamp": timestamp,
                 "activityProgress": "Completed", "gradingProgress": "FullyGraded"}
        if submitted_at or not new_submission:  # no submission: a grade, never a submission (nor an attempt) made
            score[CANVAS_SUBMISSION] = {"new_submission": new_submission,
                                        **({"submitted_at": submitted_at} if submitted_at else {})}
        status, _, body = self._call("POST", scores_url(lineitem_url), score, content_type=SCORE_TYPE)
        return status, (None if 200 <= status < 300 else refusal_text(status, body))


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def log_records(log_path):
    """Each record (a JSON object a line) of the log at ``log_path``; none when it is missing, lines that are not
    one skipped."""
    try:
        with open(log_path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def tools_line_items(log_path):
    """The line item URLs that the log at ``log_path`` (one context's) shows the tool created or posted a score to."""
    return {rec.get("lineitem") for rec in log_records(log_path)
            if (rec.get("event") == "lineitem" and rec.get("created") is True)
            or (rec.get("event") == "score" and rec.get("ok") is True)}


def posted_before(log_path, assignment):
    """{(line item, LMS user id, submitted_at)} of the scores of ``assignment`` the platform took before (the log)."""
    return {(rec.get("lineitem"), rec.get("userId"), rec.get("submitted_at")) for rec in log_records(log_path)
            if rec.get("event") == "score" and rec.get("assignment") == assignment and rec.get("ok")}


# ------------------------------------------------------------------ one assignment to the LMS
@dataclass
class PostResult:
    assignment: str
    lineitem: str = None
    created: bool = False
    posted: dict = field(default_factory=dict)       # {student: points}
    failed: dict = field(default_factory=dict)       # {student: why}
    not_posted: dict = field(default_factory=dict)   # {student: why}: no submission (posted 0 where they have an id)
    log: str = None
    passed_over: list = field(default_factory=list)  # line items labelled like the assignment, not its own: unwritten
    unchanged: dict = field(default_factory=dict)    # {student: points}: the LMS holds that score already, not posted

    @property
    def ok(self):
        return not self.failed

    def lines(self):
        """What ``course return A --lms`` prints."""
        head = (f"{self.assignment}: {counted(len(self.posted), 'score')} posted to the LMS"
                + (f", {len(self.unchanged)} it holds already left as they are" if self.unchanged else "")
                + (f" (line item {self.lineitem}{', created' if self.created else ''})" if self.lineitem else ""))
        out = [head]
        out += [f"  not written: line item {i.get('id')} is labelled {self.assignment} but is not this course's "
                f"column for it (resourceId {i.get('resourceId')!r}"
                + (f", tag {i.get('tag')!r}" if i.get("tag") else "") + ", not the launch's line item)"
                for i in self.passed_over]
        out += [f"  FAILED {s}: {why}" for s, why in sorted(self.failed.items())]
        out += [f"  no submission {s}: 0 posted" if s in self.posted else f"  not posted {s}: {why}"
                for s, why in sorted(self.not_posted.items())]
        if self.log:
            out.append(f"  log: {self.log}")
        return out


class JsonLines:
    """JSON lines appended to ``path`` (created with ``mode``: its owner's alone unless asked), never through a link;
    each record is also added to ``written`` when given (what this post wrote, whatever else writes the file)."""

    def __init__(self, path, mode=0o600, written=None):
        self.path, self.mode, self.written = os.path.abspath(path), mode, written
        os.makedirs(os.path.dirname(self.path), exist_ok=True)

    def write(self, **record):
        self.add({"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **record})

    def add(self, record):
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, self.mode)
        with os.fdopen(fd, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.written is not None:
            self.written.append(record)


def post_assignment(grades, assignment, lineitems_url, credentials, log_path, *, resource_link_id=None, tag=None,
                    timeout=TIMEOUT, written=None, lineitem_urls=()):
    """Post ``assignment``'s scores from ``grades`` (``coursekit.lms.export.read_grades``) to the context whose line
    items are at ``lineitems_url`` (to the first of ``lineitem_urls``, the LMS assignment's own line item, when the
    platform has it). Returns a ``PostResult``; raises ``AgsError`` only when nothing could be posted (no token, no
    line item)."""
    maximum = dict(grades.assignments)[assignment]
    log = JsonLines(log_path, written=written)
    result = PostResult(assignment, log=log.path)
    client = AgsClient(lineitems_url, credentials, timeout)
    try:
        item, result.created = client.find_or_create_line_item(assignment, maximum, resource_link_id,
                                                               known=lineitem_urls, passed_over=result.passed_over,
                                                               tag=tag, ours=tools_line_items(log_path))
    except AgsError as exc:
        log.write(event="lineitem", assignment=assignment, lineitems=lineitems_url, status=exc.status,
                  error=exc.message)
        raise
    result.lineitem = item["id"]
    for other in result.passed_over:
        log.write(event="lineitem passed over", assignment=assignment, lineitem=other.get("id"),
                  label=other.get("label"), resourceId=other.get("resourceId"),
                  tag=other.get("tag"),
                  why="labelled like the assignment, but neither the launch's line item nor one whose resourceId "
                      "is the assignment (with this course's tag)")
    log.write(event="lineitem", assignment=assignment, lineitem=item["id"], created=result.created,
              scoreMaximum=item.get("scoreMaximum"))
    before = posted_before(log_path, assignment)
    logged = {(lineitem, user) for lineitem, user, _ in before}
    held = client.results(item["id"])  # what the LMS holds: a score it has already is not posted again
    seen = {}  # LMS user id: the student posted for it (one score per LMS user)
    for s in grades.students:
        submitted_any = grades.submitted(s.id, assignment)
        if grades.score(s.id, assignment) is None:  # their own due date, extension included, has not passed
            result.not_posted[s.id] = "not yet due: no submission, and their due date has not passed"
            continue
        if not submitted_any:  # one rule with the export files: no submission scores 0 (nbgrader's)
            result.not_posted[s.id] = "no submission: 0"
            if not s.lms_user_id:
                result.not_posted[s.id] = "no submission, and no LMS user id to post its 0 to"
                continue
        if not s.lms_user_id:
            result.failed[s.id] = ("no LMS user id: they never launched from the LMS, or its class list no longer "
                                   "has them")
            continue
        if s.lms_user_id in seen:
            result.failed[s.id] = f"has the LMS user id of {seen[s.lms_user_id]}: not posted"
            continue
        seen[s.lms_user_id] = s.id
        given = round(grades.score(s.id, assignment), 4)
        submitted = (grades.submitted_at.get((s.id, assignment))  # None: nbgrader kept no time (posted as of now)
                     if submitted_any else None)
        # the score's timestamp is when the tool changed it (AGS; Moodle refuses one not later than the grade it
        # holds, so a regrade dated by the submission would never arrive); the submission's time goes in Canvas's
        # extension, a new attempt only the first time that submission is posted
        timestamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        if held is not None and s.lms_user_id in held and abs(held[s.lms_user_id] - given / maximum) < 1e-6:
            result.unchanged[s.id] = given
            continue
        # posted before: this submission is in the log, or the LMS holds a score of the user that the log does not
        # know (the log lost with the hub's state): a regrade then, never a new attempt
        again = ((item["id"], s.lms_user_id, submitted) in before
                 or (held is not None and s.lms_user_id in held and (item["id"], s.lms_user_id) not in logged))
        try:
            status, why = client.post_score(item["id"], s.lms_user_id, given, maximum, timestamp, submitted,
                                            new_submission=not again and submitted_any)
        except AgsError as exc:
            status, why = exc.status, exc.message
        log.write(event="score", assignment=assignment, lineitem=item["id"], student=s.id, userId=s.lms_user_id,
                  scoreGiven=given, scoreMaximum=maximum, timestamp=timestamp, submitted_at=submitted, status=status,
                  ok=why is None, **({"error": why} if why else {}))
        if why is None:
            result.posted[s.id] = given
        else:
            result.failed[s.id] = why
    return result
