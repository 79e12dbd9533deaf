"""Attacks a student can write in the body of an answer (softmax of notebook 03), shared by the isolation tests
(each run against the sandboxed worker directly) and the pipeline tests (each graded by real nbgrader).

``SOLUTIONS_DIR`` in a source stands for the folder of the reference on the grading machine: a test puts the
real path there, as a student who had seen it would.
"""

BODY_ATTACKS = {
    "import-the-reference": '''
        def softmax(x, dim=-1, temperature=1.0):
            from solutions.softmax import softmax as ref
            return ref(x, dim, temperature)
    ''',
    "call-the-reference-from-a-thread-guard-off": '''
        def softmax(x, dim=-1, temperature=1.0):
            import threading, learner.check.safe as s
            s._reference_dirs.clear()
            box = {}
            def go():
                import solutions.softmax as r
                box["v"] = r.softmax(x, dim, temperature)
            t = threading.Thread(target=go); t.start(); t.join()
            return box["v"]
    ''',
    "exec-the-reference-source": '''
        def softmax(x, dim=-1, temperature=1.0):
            path = "SOLUTIONS_DIR/softmax.py"  # where the reference lives on the grading machine
            ns = {}
            exec(compile(open(path).read(), "<mine>", "exec"), ns)
            return ns["softmax"](x, dim, temperature)
    ''',
    "read-the-source-notebook": '''
        def softmax(x, dim=-1, temperature=1.0):
            import json
            nb = json.load(open("../../../source/03_softmax/03_softmax.ipynb"))
            src = next(c["source"] for c in nb["cells"] if "def softmax" in "".join(c["source"]))
            ns = {"torch": torch}
            exec("".join(src), ns)
            return ns["softmax"](x, dim, temperature)
    ''',
    "patch-the-grader-at-call-time": '''
        def softmax(x, dim=-1, temperature=1.0):
            import learner.check, learner.check.compare
            learner.check.compare.compare = lambda *a, **k: None
            grader._problem = lambda *a, **k: None
            torch.allclose = lambda *a, **k: True
            return x * 0.5
    ''',
    "mutate-the-inputs": '''
        def softmax(x, dim=-1, temperature=1.0):
            x.fill_(0.0)
            return torch.full_like(x, 1.0 / x.shape[dim]) if x.dim() else x
    ''',
    "return-numbers-that-lie": '''
        def softmax(x, dim=-1, temperature=1.0):
            class Liar(float):
                def __eq__(self, o): return True
                def __sub__(self, o): return 0.0
                __rsub__ = __sub__
                def __abs__(self): return 0.0
            return [[Liar(0.0)]]
    ''',
    "return-a-tensor-subclass": '''
        def softmax(x, dim=-1, temperature=1.0):
            class T(torch.Tensor):
                pass
            return torch.zeros_like(x).as_subclass(T)
    ''',
    "kill-the-worker": '''
        def softmax(x, dim=-1, temperature=1.0):
            import os
            os._exit(0)
    ''',
    "allocate-without-limit": '''
        def softmax(x, dim=-1, temperature=1.0):
            blocks = []
            while True:
                blocks.append(bytearray(2**30))
    ''',
    "loop-with-the-alarm-off": '''
        def softmax(x, dim=-1, temperature=1.0):
            import signal
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            while True:
                pass
    ''',
    "fork": '''
        def softmax(x, dim=-1, temperature=1.0):
            import os, time
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            return x
    ''',
    "reach-the-network": '''
        def softmax(x, dim=-1, temperature=1.0):
            import socket, pickle
            s = socket.create_connection(("127.0.0.1", 8888), timeout=1)
            return pickle.loads(s.recv(1 << 20))
    ''',
    "write-a-forged-reply": '''
        def softmax(x, dim=-1, temperature=1.0):
            import os, io, struct
            buf = io.BytesIO()
            torch.save({"op": "result", "id": 10**6, "value": x}, buf)
            for fd in range(3, 12):
                try:
                    os.write(fd, struct.pack("<Q", len(buf.getvalue())) + buf.getvalue())
                except OSError:
                    pass
            return x
    ''',
}


# Markup a submission can put in front of the instructor (the formgrader) and the student (the feedback): each one,
# if it ever ran, would set ``window.__pwned`` (or its parent's) and ask the canary URL ``CANARY/<name>`` for a file.
# ``CANARY`` stands for a URL on 127.0.0.1 the test listens on. Encodings that try to slip past a sanitiser are
# among them (mixed case, entities, a broken tag, data: URLs).
def _js(name):
    return f"window.__pwned='{name}';(new Image()).src='CANARY/{name}'"


MARKUP_OUTPUTS = {
    "script-element": f"display(HTML(\"<script>{_js('script-element')}</script>\"))",
    "mixed-case-script": f"display(HTML(\"<ScRiPt>{_js('mixed-case-script')}</sCrIpT>\"))",
    "event-handler": f"display(HTML('<img src=x onerror=\"{_js('event-handler')}\">'))",
    "broken-tag-handler": f"display(HTML('<img src=x onerror=\"{_js('broken-tag-handler')}\" <b'))",
    "entity-encoded-handler": "display(HTML('<img src=x onerror=\"window.__pwned=&#39;entity-encoded-handler&#39;;"
                              "(new Image()).src=&#39;CANARY/entity-encoded-handler&#39;\">'))",
    "javascript-link": f"display(HTML('<a class=\"pwn-link\" href=\"javascript:{_js('javascript-link')}\">open</a>'"
                       f"'<a class=\"pwn-link\" href=\" JaVaScRiPt:{_js('javascript-link')}\">again</a>'))",
    "data-url": "display(HTML('<a class=\"pwn-link\" href=\"data:text/html,<script>parent.__pwned=1</script>\">d</a>"
                "<object data=\"data:text/html;base64,PHNjcmlwdD5wYXJlbnQuX19wd25lZD0xPC9zY3JpcHQ+\"></object>"
                "<embed src=\"CANARY/data-url-embed\">'))",
    "svg-script": "display({'image/svg+xml': '<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"" + _js("svg-onload")
                  + "\"><script>" + _js("svg-script") + "</script><image href=\"CANARY/svg-image\"/></svg>'}, raw=True)",
    "iframe-srcdoc": "display(HTML('<iframe srcdoc=\"<script>parent.__pwned=&quot;iframe&quot;;(new Image()).src="
                     "&quot;CANARY/iframe-srcdoc&quot;</script>\"></iframe><iframe src=\"CANARY/iframe-src\">"
                     "</iframe>'))",
    "markdown-output": f"display(Markdown('<img src=x onerror=\"{_js('markdown-output')}\"> and "
                       f"[a link](javascript:{_js('markdown-output-link')})'))",
    "javascript-output": f"display(Javascript(\"{_js('javascript-output')}\"))",
    "latex-output": "display({'text/latex': '$x$<script>" + _js("latex-output") + "</script>'}, raw=True)",
    "style-and-base": "display(HTML('<style>@import url(CANARY/style-import);</style>"
                      "<base href=\"CANARY/base/\"><link rel=stylesheet href=\"CANARY/link\">'))",
    "fake-png": "display({'image/png': 'x\" onerror=\"" + _js("fake-png") + "'}, raw=True)",
    "png-metadata": "display({'image/png': PNG}, metadata={'image/png': {'width': '1 onerror=" + _js("png-metadata")
                    .replace("'", "&#39;") + "'}}, raw=True)",
}

MARKUP_CELLS = [  # (cell type, source, extra fields): cells a student adds to a notebook
    ("markdown", f"My notes <script>{_js('markdown-cell')}</script> <img src=x onerror=\"{_js('markdown-cell-img')}\">"
                 f" [open](javascript:{_js('markdown-cell-link')}) ```` ``` <ScRiPt>{_js('markdown-fence')}</sCrIpT>",
     {}),
    ("raw", f"<script>{_js('raw-html-cell')}</script>", {"metadata": {"raw_mimetype": "text/html"}}),
    ("raw", f"<img src=x onerror=\"{_js('raw-cell')}\">", {}),
]

MARKUP_PRELUDE = '''
from IPython.display import HTML, Image, Javascript, Markdown, display
import base64, io
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import learner.check
fig, ax = plt.subplots(figsize=(2, 2))
ax.plot([0, 1, 2], [0, 1, 4], label="my plot")
buf = io.BytesIO(); fig.savefig(buf, format="png"); PNG = base64.b64encode(buf.getvalue()).decode()
display(Image(buf.getvalue(), format="png"))
'''


def with_markup(nb, canary):
    """``nb`` with the markup payloads added as a student's own cells (a plot first); returns a new notebook."""
    import copy

    import nbformat
    nb = copy.deepcopy(nb)
    cells = [nbformat.v4.new_code_cell(MARKUP_PRELUDE)]
    cells += [nbformat.v4.new_code_cell(src.replace("CANARY", canary)) for src in MARKUP_OUTPUTS.values()]
    for kind, source, extra in MARKUP_CELLS:
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_raw_cell
        cells.append(make(source.replace("CANARY", canary), **extra))
    nb.cells = nb.cells + cells
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                             "version_minor": 0}}
    return nb


# Routes to the course's ready-made version of an exercise (here masked_attention of notebook 04, whose ready-made
# version is learner.blocks.masked_attention): while notebook 04 is graded it is not in the sandbox at all
# (grader.sandbox.masked), so each route reaches only a function that raises, or nothing.
READY_MADE_ROUTES = {
    "direct-call": '''
        def masked_attention(Q, K, V, mask=None):
            from learner.blocks import masked_attention as ready
            return ready(Q, K, V, mask)
    ''',
    "copy-of-its-code": '''
        def masked_attention(Q, K, V, mask=None):
            import types, learner.blocks as b
            f = b.masked_attention
            copy = types.FunctionType(f.__code__.replace(co_name="mine"), f.__globals__, "mine", f.__defaults__)
            return copy(Q, K, V, mask)
    ''',
    "functools-partial": '''
        def masked_attention(Q, K, V, mask=None):
            import functools, learner.blocks as b
            return functools.partial(b.masked_attention, Q)(K, V, mask)
    ''',
    "functools-wraps": '''
        def masked_attention(Q, K, V, mask=None):
            import functools, learner.blocks as b
            @functools.wraps(b.masked_attention)
            def inner(*a):
                return b.masked_attention.__wrapped__(*a) if hasattr(b.masked_attention, "__wrapped__") else \
                    b.masked_attention(*a)
            return inner(Q, K, V, mask)
    ''',
    "marshal-copy": '''
        def masked_attention(Q, K, V, mask=None):
            import marshal, types, learner.blocks as b
            code = marshal.loads(marshal.dumps(b.masked_attention.__code__))
            return types.FunctionType(code, vars(b))(Q, K, V, mask)
    ''',
    "from-a-thread-profiler-off": '''
        def masked_attention(Q, K, V, mask=None):
            import sys, threading, learner.blocks as b
            sys.setprofile(None); threading.setprofile(None)
            box = {}
            t = threading.Thread(target=lambda: box.update(v=b.masked_attention(Q, K, V, mask)))
            t.start(); t.join()
            return box["v"]
    ''',
    "from-a-generator": '''
        def masked_attention(Q, K, V, mask=None):
            import learner.blocks as b
            return next(b.masked_attention(*a) for a in [(Q, K, V, mask)])
    ''',
    "through-map": '''
        def masked_attention(Q, K, V, mask=None):
            import learner.blocks as b
            return list(map(b.masked_attention, [Q], [K], [V], [mask]))[0]
    ''',
    "profiler-replaced": '''
        def masked_attention(Q, K, V, mask=None):
            import sys, learner.blocks as b
            sys.setprofile(lambda *a: None)
            return b.masked_attention(Q, K, V, mask)
    ''',
    "exec-its-source": '''
        def masked_attention(Q, K, V, mask=None):
            import inspect, learner.blocks as b
            ns = dict(vars(b))
            exec(compile(open(inspect.getsourcefile(b)).read(), "<mine>", "exec"), ns)
            return ns["masked_attention"](Q, K, V, mask)
    ''',
    "load-its-compiled-file": '''
        def masked_attention(Q, K, V, mask=None):
            import glob, marshal, os, types, learner.blocks as b
            for pyc in glob.glob(os.path.join(os.path.dirname(b.__file__), "__pycache__", "blocks*.pyc")):
                data = open(pyc, "rb").read()
                if len(data) > 16:
                    module = marshal.loads(data[16:])
                    ns = dict(vars(b)); exec(module, ns)
                    return ns["masked_attention"](Q, K, V, mask)
            raise RuntimeError("no compiled file")
    ''',
    "reload-the-module": '''
        def masked_attention(Q, K, V, mask=None):
            import importlib, sys, learner.blocks as b
            sys.modules.pop("learner.blocks", None)
            fresh = importlib.import_module("learner.blocks")
            return importlib.reload(fresh).masked_attention(Q, K, V, mask)
    ''',
}


# Bombs a cell of a submission runs, each until the sandbox refuses it (the pipeline and the hub tests)
FORK_UNTIL_REFUSED = '''
import os as _os, time as _time
import learner.check
while True:  # forks until the sandbox refuses: the children hold the process budget for a while
    if _os.fork() == 0:
        _time.sleep(20)
        _os._exit(0)
'''
ALLOCATE_UNTIL_REFUSED = '''
_hog = []
while True:  # memory, every page written, until the sandbox refuses
    _hog.append(b"x" * 2**26)
'''
