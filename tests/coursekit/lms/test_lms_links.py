"""The ``Link`` headers of the LMS's paged answers (coursekit/lms/links.py), one parser for the class list (NRPS) and
the line items and results (AGS): generated headers as RFC 8288 allows them (relation types in any case, several in
one ``rel``, parameters with quoted commas and semicolons, URIs with commas, one header or several) give the first
link of each relation type; a ``next`` page on another site than the list's is not followed, and each service
then takes its list as not whole. Cost: about 2 s (generated headers, in this process)."""
import email.message
import json

import pytest
from hypothesis import given, settings, strategies as st

from coursekit.lms import ags, roster
from coursekit.lms.ags import AgsClient, AgsError
from coursekit.lms.links import OffSite, link, next_page

RELS = ["next", "prev", "first", "last", "differences", "nextish", "alternate"]
CASED = st.sampled_from(RELS).flatmap(lambda r: st.sampled_from([r, r.upper(), r.capitalize()]))
QUOTED = st.text(alphabet=st.sampled_from(list('ab ,;=<>\\"')), max_size=8)
LINK = st.tuples(st.text(alphabet=st.sampled_from(list("abc123/?=&,;")), max_size=10),
                 st.lists(CASED, min_size=1, max_size=3), st.lists(QUOTED, max_size=2), st.booleans())


def written(uri, rels, titles, quoted_rel):
    rel = " ".join(rels)
    rel = f'rel="{rel}"' if quoted_rel or len(rels) > 1 else f"rel={rel}"
    before = "".join(f'; title="{t.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                     for t in titles[:1])
    after = "".join(f'; title*="{t.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                    for t in titles[1:])
    return f"<https://lms.example/{uri}>{before} ;{rel}{after}"


@given(st.lists(LINK, min_size=1, max_size=5), st.integers(min_value=1, max_value=3))
@settings(max_examples=300, deadline=None, database=None)
def test_the_first_link_of_each_relation_type_whatever_the_case_the_params_and_the_headers(links, headers_count):
    values = [written(*one) for one in links]
    headers = email.message.Message()
    for n in range(headers_count):  # the links spread over one Link header or several, in order
        part = values[n * len(values) // headers_count:(n + 1) * len(values) // headers_count]
        if part:
            headers["Link"] = ", ".join(part)
    for rel in RELS:
        expected = next((f"https://lms.example/{uri}" for uri, rels, _, _ in links
                         if rel in [r.lower() for r in rels]), None)
        assert link(headers, rel) == expected, (values, rel)
        assert link(headers, rel.upper()) == expected


@pytest.mark.parametrize("after", ["https://evil.example/m?p=2", "http://lms.example/m?p=2",
                                   "https://lms.example:8443/m?p=2", "//evil.example/m?p=2"])
def test_a_next_page_on_another_site_is_not_followed_and_the_list_is_not_whole(monkeypatch, after):
    """The class list and the line items each refuse a list whose next page is elsewhere (the tool's token would go
    with the request, and a list read in part would take students out or make a second column); the results are
    then not trusted (every score posted). A relative next page is the list's own."""
    headers = email.message.Message()
    headers["Link"] = f'<{after}>; rel="Next"'
    with pytest.raises(OffSite):
        next_page(headers, "https://lms.example/m", "https://lms.example/m")
    relative = email.message.Message()
    relative["Link"] = '</m?p=2>; rel="next"'
    assert next_page(relative, "https://lms.example/m", "https://lms.example/m") == "https://lms.example/m?p=2"

    def answer(method, url, **kwargs):
        body = {"members": [{"user_id": "1", "roles": ["Learner"]}]} if "/m" in url else []
        return 200, headers, json.dumps(body).encode()
    for module in (roster, ags):
        monkeypatch.setattr(module, "http_request", answer)
        monkeypatch.setattr(module, "access_token", lambda *a, **k: "token")
    with pytest.raises(AgsError, match="another site"):
        roster.read_members("https://lms.example/m", None)
    client = AgsClient("https://lms.example/items", None)
    with pytest.raises(AgsError, match="another site"):
        client.line_items()
    assert client.results("https://lms.example/items/1") is None
