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
            import threading, grader._safe as s
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
            import grader, grader.compare
            grader.compare.compare = lambda *a, **k: None
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
