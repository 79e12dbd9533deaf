"""What an LTI hub shows the platform and the browser besides the launch itself (coursekit/hub/lti.py):

* ``/hub/lti13/config``: the tool's configuration as JSON in Canvas's format (a developer key's "Enter URL" or
  "Paste JSON"), saying exactly what docs/lms.md says: the scopes the course uses (``SCOPES``), the custom fields it
  reads (``CUSTOM_FIELDS``), its URLs, its public key, and links that open in a window of their own;
* the framed launch: a platform that embeds the tool in an iframe of its page (Canvas's and Moodle's default)
  starts the login inside that frame. The hub refuses to be framed (JupyterHub's ``frame-ancestors 'none'``), so
  the login initiation, unless the browser says it is a window's own (``Sec-Fetch-Dest: document``, which
  Chromium, Firefox and Safari 16.4+ send), answers with a page of one button that starts the same login in a new
  window, where the hub and JupyterLab show as they are; nothing else of the hub may be framed;
* ``CLOCK_LEEWAY``: seconds of clock difference allowed between the platform and the hub for the id_token's
  ``iat``, ``nbf`` and ``exp`` (ltiauthenticator's ``LTI13LaunchValidator.time_leeway``, 0 unless set, which PyJWT
  applies to all three and ltiauthenticator adds to ``max_age`` for the token's age).
"""
import html
import json
import os

from ..lms.ags import SCOPE_LINEITEM, SCOPE_LINEITEM_READONLY, SCOPE_RESULT_READONLY, SCOPE_SCORE

CLOCK_LEEWAY = 120  # seconds: two minutes of clock drift either way; Moodle's id_token lives 60 s, Canvas's an hour

#: the scopes the course asks for: line items found or created and scores posted (coursekit/lms/ags.py), the class list
#: read (coursekit/lms/roster.py)
SCOPES = (SCOPE_LINEITEM, SCOPE_LINEITEM_READONLY, SCOPE_SCORE, SCOPE_RESULT_READONLY,
          "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly")

#: the custom fields the hub reads from a launch, with the Canvas variable each is given: the user's Canvas ids,
#: kept for the gradebook import's matching (coursekit/lms/export.py); a ``username_claim = "custom:NAME"`` reads one
CUSTOM_FIELDS = {"canvas_user_id": "$Canvas.user.id", "canvas_login_id": "$Canvas.user.loginId",
                 "canvas_sis_id": "$Canvas.user.sisSourceId"}

LTI_CUSTOM = "https://purl.imsglobal.org/spec/lti/claim/custom"
TITLE = "Attention course"
DESCRIPTION = "The course's JupyterHub: notebooks, assignments and grades"
FRAMED_TITLE = "Open the course"
FRAMED_BUTTON = "Open the course in a new window"
LOGIN_FIELDS = ("iss", "login_hint", "target_link_uri", "lti_message_hint", "client_id", "lti_deployment_id")


def custom_ids(claims):
    """{field: value} of the custom fields the hub reads (``CUSTOM_FIELDS``) that a launch's claims carry expanded:
    a platform that cannot expand a variable sends it as it is (``$Canvas.user.loginId``), which is no id."""
    custom = claims.get(LTI_CUSTOM) if isinstance(claims.get(LTI_CUSTOM), dict) else {}
    custom = {k: str(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in custom.items()}
    return {k: custom[k][:200] for k in CUSTOM_FIELDS  # (an older Canvas expands an id to a number)
            if isinstance(custom.get(k), str) and custom[k].strip() and not custom[k].startswith("$")}


def public_base(settings):
    """``scheme://host[:port]`` of the hub as configured, from JupyterHub's tornado ``settings``: its
    ``public_url`` (``c.JupyterHub.public_url``, which ``course hub --extra-config`` may set; behind a proxy the
    URL the platform reaches), else the proxy's own URL (``bind_url``). Never the request's ``Host`` header, which
    whoever asks chooses: a configuration read through ``Host: evil.example`` would send the platform's logins,
    launches and keys there."""
    from urllib.parse import urlparse
    public = settings.get("public_url")
    if not public:
        proxy = settings.get("proxy")
        public = urlparse(getattr(proxy, "public_url", "") or "")
    elif isinstance(public, str):
        public = urlparse(public)
    return f"{public.scheme or 'http'}://{public.netloc}"


def tool_configuration(base, login_url, public_jwk):
    """The tool's configuration for Canvas (its LTI 1.3 developer key JSON): ``base`` is the hub's URL
    (``https://HUB``), ``login_url`` its login initiation URL."""
    target = f"{base}/hub/"
    placements = [{"placement": placement, "message_type": "LtiResourceLinkRequest", "target_link_uri": target,
                   "windowTarget": "_blank", "text": TITLE}
                  for placement in ("course_navigation", "link_selection", "assignment_selection")]
    return {"title": TITLE, "description": DESCRIPTION, "oidc_initiation_url": login_url, "target_link_uri": target,
            "public_jwk": public_jwk, "scopes": list(SCOPES), "custom_fields": dict(CUSTOM_FIELDS),
            "extensions": [{"platform": "canvas.instructure.com", "privacy_level": "public",
                            "settings": {"platform": "canvas.instructure.com", "text": TITLE,
                                         "placements": placements}}]}


def framed_page(action, fields):
    """The page a framed login initiation gets: one button that sends the same initiation to ``action`` in a new
    window (a form, so it works without script; the platform's fields as it sent them)."""
    inputs = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                     for k, v in fields.items())
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{FRAMED_TITLE}</title></head>'
            f'<body style="font-family: sans-serif; text-align: center; padding-top: 3em">'
            f'<p>The course opens in a window of its own.</p>'
            f'<form method="post" action="{html.escape(action)}" target="_blank">{inputs}'
            f'<button type="submit" id="open-course" style="font-size: 1.2em; padding: 0.6em 1.2em">'
            f'{FRAMED_BUTTON}</button></form></body></html>')


# the framed page's own policy: it may be framed by any page (it holds nothing but the platform's own fields, and
# its one button opens a window) and runs no script; no form-action, which would also bind the redirect of the
# login it starts to the platform's authorization URL
FRAMED_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors *; base-uri 'none'"


def handlers():
    """(login initiation handler, configuration handler): ltiauthenticator's, with the above."""
    from ltiauthenticator.lti13.handlers import LTI13ConfigHandler, LTI13LoginInitHandler
    from ltiauthenticator.utils import convert_request_to_dict

    class LoginInitHandler(LTI13LoginInitHandler):
        """ltiauthenticator's login initiation; in a frame, the page of one button instead."""

        def post(self):
            # only a browser that says the initiation is a window's own (Sec-Fetch-Dest: document) gets the login
            # here; a frame's, or one from a browser that does not say (Safari before 16.4), gets the page whose
            # button opens it in a window: at worst one more click, never a blank frame
            if self.request.headers.get("Sec-Fetch-Dest", "").lower() != "document":
                args = convert_request_to_dict(self.request.arguments)
                fields = {k: args[k] for k in LOGIN_FIELDS if isinstance(args.get(k), str)}
                self.set_header("Content-Security-Policy", FRAMED_POLICY)
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.set_header("Cache-Control", "no-store")
                self.log.info("LTI login initiation in a frame (login_hint %r): the page that opens a window",
                              fields.get("login_hint"))
                self.finish(framed_page(self.request.path, fields))
                return
            return super().post()

        get = post

    class ConfigHandler(LTI13ConfigHandler):
        """The tool's configuration (``tool_configuration``)."""

        async def get(self):
            base = public_base(self.settings)
            login = self.authenticator.login_url(base + self.hub.server.base_url)
            key = os.path.join(self.authenticator.course_settings["state"], "lti-tool-public-key.json")
            with open(key) as f:
                public_jwk = json.load(f)["jwk"]
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps(tool_configuration(base, login, public_jwk), indent=1))

    return LoginInitHandler, ConfigHandler
