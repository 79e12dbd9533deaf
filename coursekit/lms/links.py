"""The ``Link`` headers of the LMS's paged answers (RFC 8288), one parser for the class list (NRPS,
``coursekit.lms.roster``) and the line items and results (AGS, ``coursekit.lms.ags``).

A response may carry several ``Link`` headers, each a comma-separated list of ``<URI>; param=value; ...``; a
parameter's value may be a quoted string holding commas and semicolons (``title="page 2, of 2"``), and a URI may
hold commas too (``<...?ids=1,2>``). ``rel`` is a space-separated list of relation types (``rel="prev next"``),
which compare case-insensitively (RFC 8288 section 2.1.1: ``Next`` is ``next``); a URI may be relative to the
request's. ``link`` gives the first link of a relation type; ``next_page`` the ``next`` link only when it is on the
same site (scheme, host and port) as the list it continues: the tool's token goes with each request, and a page
that sends it elsewhere is a list the tool does not follow (``OffSite``: the caller takes the list as cut short).
"""
import urllib.parse


class OffSite(ValueError):
    """A ``next`` link to another site than the list's: not followed, and the list is not whole."""


def _values(headers):
    if headers is None:
        return []
    values = headers.get_all("Link") if hasattr(headers, "get_all") else [headers.get("Link")]
    return [v for v in values or () if isinstance(v, str)]


def _quoted(text, i):
    """(the quoted string starting at ``text[i]`` (a double quote) without its quotes, the index after it)."""
    out, i = [], i + 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and i + 1 < len(text):
            i += 1
        out.append(text[i])
        i += 1
    return "".join(out), i + 1


def parse(value):
    """[(URI, {parameter: value})] of one ``Link`` header value; parameter names lowercased, the first of a name
    kept (RFC 8288 section 3: later ``rel`` parameters are ignored)."""
    links, i, n = [], 0, len(value)
    while i < n:
        start = value.find("<", i)
        if start < 0:
            break
        end = value.find(">", start)
        if end < 0:
            break
        uri, params, i = value[start + 1:end].strip(), {}, end + 1
        while i < n:
            while i < n and value[i] in " \t":
                i += 1
            if i >= n or value[i] != ";":
                break
            i += 1
            j = i
            while j < n and value[j] not in "=;,":
                j += 1
            name, i = value[i:j].strip().lower(), j
            param = ""
            if i < n and value[i] == "=":
                i += 1
                while i < n and value[i] in " \t":
                    i += 1
                if i < n and value[i] == '"':
                    param, i = _quoted(value, i)
                else:
                    j = i
                    while j < n and value[j] not in ";,":
                        j += 1
                    param, i = value[i:j].strip(), j
            if name:
                params.setdefault(name, param)
        links.append((uri, params))
        while i < n and value[i] not in ",":  # anything else up to the next link is not this one's
            if value[i] == '"':
                i = _quoted(value, i)[1]
            else:
                i += 1
        i += 1
    return links


def link(headers, rel, base=None):
    """The URL (made absolute against ``base``, the request's URL, when given) of the first link of the ``Link``
    headers whose ``rel`` has the relation type ``rel`` (case-insensitively), or None."""
    want = rel.lower()
    for value in _values(headers):
        for uri, params in parse(value):
            if want in params.get("rel", "").lower().split():
                return urllib.parse.urljoin(base, uri) if base else uri
    return None


def same_site(url, other):
    a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(other)
    return (a.scheme.lower(), a.netloc.lower()) == (b.scheme.lower(), b.netloc.lower())


def next_page(headers, url, first):
    """The ``next`` page of the list whose page at ``url`` answered with ``headers`` (None: the last page); raises
    ``OffSite`` when it is on another site than ``first``, the list's first page."""
    after = link(headers, "next", base=url)
    if after and not same_site(first, after):
        raise OffSite(f"the list's next page is on another site ({after}) than the list ({first}): not followed")
    return after
