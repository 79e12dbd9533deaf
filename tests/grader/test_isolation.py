"""Grading isolation: the sandbox, the worker that holds a student's functions, the trusted verdict.

Everything here runs the real sandbox (bubblewrap; `.ci/run` installs it). The
kernel nbgrader runs a submission in is driven on small notebooks in
tests/grader/test_kernel.py; the real-nbgrader side (tamper classes, feedback) is in
tests/coursekit/pipeline/test_pipeline.py.
"""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from attacks import BODY_ATTACKS, READY_MADE_ROUTES

import learner.check
from coursekit import ROOT
from coursekit.sync import setup_source, solution_source
from coursekit.samples import edited_source
from grader import judge, remote, sandbox, wire
from learner.check import EXERCISES, safe, check
from helpers import failure


def run_in_sandbox(code, tmp_path, **limits):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    sandbox.prepare_folder(str(work))
    cmd = sandbox.command([sys.executable, "-I", "-c", textwrap.dedent(code)], str(work),
                          limits=sandbox.Limits(**limits) if limits else None)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


SOLUTIONS_DIR = os.path.dirname(importlib.util.find_spec("solutions").origin)


def worker_for(notebook, overrides=None):
    """A sandboxed worker holding every answer of ``notebook`` (the reference's source unless overridden)."""
    cells = [textwrap.dedent((overrides or {}).get(name) or solution_source(name)).replace("SOLUTIONS_DIR",
                                                                                          SOLUTIONS_DIR)
             for name, ex in EXERCISES.items() if ex.notebook == notebook]
    w = remote.Worker(setup_source(notebook), cells)
    w.start()
    return w


# ---------------------------------------------------------------- what the sandbox shows
def test_the_sandbox_hides_the_reference_the_course_and_the_network(tmp_path):
    """Inside: no `solutions`, no course folder or gradebook, no network, a plain user, the grader importable."""
    course_dir = os.path.join(ROOT, "course")
    proc = run_in_sandbox(f'''
        import os, socket, importlib.util
        print("uid", os.getuid())
        print("solutions", importlib.util.find_spec("solutions") is not None)
        print("course", os.path.exists({course_dir!r}))
        print("root", os.access("/root", os.R_OK))
        import learner.check
        print("reference", learner.check.reference_available())
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=3)
            print("network yes")
        except OSError:
            print("network no")
        open("mine.txt", "w").write("x")
        print("writes", sorted(os.listdir(".")))
    ''', tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "uid 0" not in out and "solutions False" in out and "course False" in out, out
    assert "reference False" in out and "network no" in out, out
    assert "writes ['.course-audit.jsonl', 'mine.txt']" in out, out  # the audit notes' file is bound there
    assert not (tmp_path / "work" / "mine.txt").exists()  # written to the sandbox's own scratch, not the host's disk


def test_the_sandbox_limits_memory_and_processes(tmp_path):
    """A huge allocation is refused in words; threads past the process limit are refused. (On a CUDA build the cap
    on address space stands above its CUDA libraries: the allocation is a GB past it.)"""
    proc = run_in_sandbox('''
        import threading, time
        try:
            bytearray(3 * 2**30 + CUDA_LIBRARIES)
            print("allocated")
        except MemoryError:
            print("memory refused")
        made = 0
        try:
            for _ in range(200):
                threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
                made += 1
        except RuntimeError:
            pass
        print("threads", made)
    '''.replace("CUDA_LIBRARIES", str(sandbox.cuda_library_bytes())), tmp_path, memory_bytes=2 * 2 ** 30, processes=64)
    assert "memory refused" in proc.stdout, proc.stdout + proc.stderr
    made = int(proc.stdout.split("threads")[1])
    assert made < 64, proc.stdout


def test_without_bwrap_grading_stops_naming_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("COURSE_ISOLATION", raising=False)
    with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap"):
        sandbox.command(["true"], str(tmp_path))
    monkeypatch.setenv("COURSE_ISOLATION", "none")
    assert sandbox.command(["true"], str(tmp_path)) == ["true"]  # the instructor's explicit choice


# ---------------------------------------------------------------- plain data only
class _LyingFloat(float):
    def __eq__(self, other):
        return True


class _LyingTensor(__import__("torch").Tensor):
    pass


@pytest.mark.parametrize("value", [_LyingFloat(1.0), [1, _LyingFloat(2.0)], {"a": (_LyingFloat(0.5),)},
                                   __import__("torch").zeros(2).as_subclass(_LyingTensor), object()])
def test_only_plain_data_crosses_the_boundary(value):
    with pytest.raises(wire.NotPlain):
        wire.check_plain(value)


# ---------------------------------------------------------------- the reference, run as a student's code
# Two notebooks here, for the fast loop: 03, and 09, whose grader-owned models the checks drive by callbacks. Every
# notebook's reference passes every graded cell through the same sandboxed worker and judge in the pipeline tests
# (test_reference_answers_score_full_marks), and one other style per notebook does too (test_other_styles.py).
@pytest.mark.parametrize("notebook", ["03_softmax", "09_kv_cache"])
def test_the_reference_answers_pass_every_part_through_the_sandbox(notebook):
    """The reference's own source, held by a sandboxed worker, passes all four parts (the reference's
    outputs computed on the trusted side); grader-owned models (notebook 09) are driven by callbacks."""
    with worker_for(notebook) as w:
        for name, ex in EXERCISES.items():
            if ex.notebook != notebook:
                continue
            fn = w.function(name, name)
            assert fn is not None, f"{name} was not defined in the worker: {w.define_errors}"
            for part in learner.check.parts_of(name):
                check(name, fn, part)
        assert not w.faults, w.faults


def test_a_known_mistake_gets_the_same_message_in_the_sandbox_as_in_the_kernel():
    from helpers import as_learner
    wrong = solution_source("softmax").replace("z = x / temperature", "z = x * temperature")
    assert wrong != solution_source("softmax")
    local = as_learner({"softmax": wrong})["softmax"]
    with worker_for("03_softmax", {"softmax": wrong}) as w:
        for part in ("basic", "edge"):
            assert failure("softmax", w.function("softmax", "softmax"), part) == failure("softmax", local, part)


def test_the_worker_loads_torchs_lazy_parts_before_the_first_meta_device_call_and_never_loads_dynamo():
    """PyTorch's meta-device kernels (the grader's device probe) import torch._dynamo on their first call, over a
    second of CPU, only to wrap themselves for torch.compile: the worker spares that import (``spare_dynamo``), and
    loads what those kernels still need (sympy) when the first call with inputs on the meta device arrives, before
    the student's function runs under its time limit, and not before (a worker whose functions are never probed
    never pays for it). The device probe itself still catches a tensor made on the wrong device."""
    probe = ("def softmax(x, dim=-1, temperature=1.0):\n    import sys\n"
             "    return ['torch._dynamo' in sys.modules, 'sympy' in sys.modules]\n")
    with worker_for("03_softmax", {"softmax": probe}) as w:
        fn = w.function("softmax", "softmax")
        assert fn(torch.zeros(2, 3)) == [False, False]
        assert fn(torch.zeros(2, 3, device="meta")) == [False, True]


def test_sparing_dynamo_leaves_what_pytorchs_kernels_compute_unchanged():
    """The meta device's shapes and dtypes, and CPU values through the same Python kernels, are the same with
    ``spare_dynamo`` as without it, in two fresh processes; only the spared one never loads torch._dynamo."""
    script = textwrap.dedent("""
        import json, sys, torch, torch.nn.functional as F
        from learner.check import devices
        spared = devices.spare_dynamo() if sys.argv[1] == "spare" else 0
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 3, 4, 8, generator=g) for _ in range(3))
        out = []
        for device in ("meta", "cpu"):
            a, b, c = q.to(device), k.to(device), v.to(device)
            mask = torch.ones(4, 4, dtype=torch.bool, device=device).tril()
            for y in ((a / 2).softmax(-1), F.layer_norm(a, (8,)), torch.cat([a, b]).masked_fill(~mask[:, :1], 0.0),
                      F.scaled_dot_product_attention(a, b, c, attn_mask=mask), torch.log_softmax(a @ b.mT, -1)):
                out.append([list(y.shape), str(y.dtype), None if device == "meta" else y.double().sum().item()])
        print(json.dumps({"spared": spared, "dynamo": "torch._dynamo" in sys.modules, "out": out}))
    """)
    runs = {}
    for how in ("spare", "plain"):
        proc = subprocess.run([sys.executable, "-c", script, how], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[how] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert runs["spare"]["spared"] > 0 and not runs["spare"]["dynamo"]
    assert runs["plain"]["dynamo"]  # PyTorch's own path loads it (so the first assertion can fail)
    assert runs["spare"]["out"] == runs["plain"]["out"]


# ---------------------------------------------------------------- what a function body can try
ATTACKS = BODY_ATTACKS


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_function_body_cannot_earn_a_pass_from_inside_the_sandbox(attack, monkeypatch):
    """Each attack, written in the function's own body, fails every part of the check in words (the pipeline's tamper
    class grades some of them through nbgrader as well: BODY_ATTACKS_THROUGH_NBGRADER)."""
    if "loop" in attack:  # a loop is stopped at any limit: 1 s (+ 1 s) rather than the learner's 10 s (+ 5 s)
        monkeypatch.setattr(safe, "DEFAULT_TIME_LIMIT", 1.0)
        monkeypatch.setattr(remote, "GRACE", 1.0)
    mem = os.environ.get("COURSE_SANDBOX_MEMORY_MB")
    os.environ["COURSE_SANDBOX_MEMORY_MB"] = "2560"  # the worker uses under 1 GB; an allocation attack zeroes the rest
    try:
        with worker_for("03_softmax", {"softmax": ATTACKS[attack]}) as w:
            fn = w.function("softmax", "softmax")
            for part in ("basic", "edge", "hidden-basic", "hidden"):  # the maths; the errors cells check refusals
                msg = failure("softmax", fn, part)
                assert msg.startswith("FAILED softmax"), msg
            if "loop" in attack:  # stopped from outside, with the alarm off too, and noted for the instructor
                assert any(kind == "timeout" and "did not finish within" in text for kind, text in w.faults), w.faults
    finally:
        if mem is None:
            os.environ.pop("COURSE_SANDBOX_MEMORY_MB", None)
        else:
            os.environ["COURSE_SANDBOX_MEMORY_MB"] = mem


def test_a_dead_or_stopped_worker_is_recorded_and_started_again():
    src = textwrap.dedent(ATTACKS["kill-the-worker"]) + "\n" + solution_source("log_softmax")
    with worker_for("03_softmax", {"softmax": src}) as w:
        msg = failure("softmax", w.function("softmax", "softmax"), "basic")
        assert "died" in msg and "exited with code 0" in msg, msg
        check("log_softmax", w.function("log_softmax", "log_softmax"), "basic")  # a fresh worker grades the rest
        assert any(kind == "crash" for kind, _ in w.faults)


# ---------------------------------------------------------------- fair tolerances, devices
LOGSUMEXP = '''
    def log_softmax(x, dim=-1, temperature=1.0):
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        z = x / temperature
        lse = torch.logsumexp(z, dim, keepdim=True)
        return torch.where(torch.isinf(lse) & (lse < 0), torch.full_like(z, float("-inf")), z - lse)
'''
LOG_OF_SUM = '''
    def log_softmax(x, dim=-1, temperature=1.0):
        if temperature <= 0:
            raise ValueError("temperature must be positive")
        z = x / temperature
        if z.shape[dim] == 0:
            return z.clone()
        m = z.amax(dim=dim, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        out = z - m - (z - m).exp().sum(dim=dim, keepdim=True).log()
        return torch.where(torch.isneginf(z), z, out)  # log 0 = -inf, also in a row with nothing allowed
'''


@pytest.mark.parametrize("src", [LOGSUMEXP, LOG_OF_SUM], ids=["logsumexp", "max-shift"])
def test_standard_log_softmax_formulations_pass_with_logits_near_1e4(src):
    """The tolerance grows with the logits' size (log-softmax is exact only to about eps x |x|)."""
    with worker_for("03_softmax", {"log_softmax": src}) as w:
        for part in learner.check.parts_of("log_softmax"):
            check("log_softmax", w.function("log_softmax", "log_softmax"), part)


def test_what_a_call_did_in_the_sandbox_comes_back_to_the_checks_words(monkeypatch):
    """The worker measures what the checks ask of a call and sends it back with the result: the largest tensor it
    made (score_variance scoring every query against every key), whether it changed PyTorch's global random state
    (sample_next reseeding it), where and after how long a time-out stopped it. The hidden parts, which only run
    in the sandbox, then say what the visible parts say in the learner's kernel."""
    from learner.check.cases.common import RANDOM_STATE
    all_pairs = solution_source("score_variance").replace("raw = (q * k).sum(-1)", "raw = q @ k.T")
    with worker_for("02_dot_products", {"score_variance": all_pairs}) as w:
        msg = failure("score_variance", w.function("score_variance", "score_variance"), "hidden-basic")
    assert dict(EXERCISES["score_variance"].mistakes)["dot_products:score_variance_all_pairs"] in msg, msg
    reseeding = solution_source("sample_next").replace(
        "g = torch.Generator(device=logits.device).manual_seed(seed)", "torch.manual_seed(seed)").replace(
        "torch.multinomial(probs, 1, generator=g)", "torch.multinomial(probs, 1)")
    with worker_for("07_decoder", {"sample_next": reseeding}) as w:
        msg = failure("sample_next", w.function("sample_next", "sample_next"), "hidden")
    assert RANDOM_STATE in msg, msg
    monkeypatch.setattr(safe, "DEFAULT_TIME_LIMIT", 1.0)
    monkeypatch.setattr(remote, "GRACE", 1.0)
    with worker_for("03_softmax", {"softmax": "def softmax(x, dim=-1, temperature=1.0):\n    while True:\n"
                                              "        pass\n"}) as w:
        msg = failure("softmax", w.function("softmax", "softmax"), "hidden-basic")
    assert "did not finish within 1 s of computing and was stopped in `softmax` (line " in msg, msg


MASKED_ATTENTION_WITH_FILL = '''
    def masked_attention(Q, K, V, mask=None):
        d_k = Q.shape[-1]
        if K.shape[-1] != d_k or K.shape[-2] != V.shape[-2]:
            raise ValueError(f"shapes {tuple(Q.shape)} {tuple(K.shape)} {tuple(V.shape)} do not fit")
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            if mask.dtype != torch.bool:
                raise ValueError("the mask must be bool (True = may attend)")
            try:
                fits = torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
            except RuntimeError:
                fits = False
            if not fits:
                raise ValueError("the mask does not broadcast")
            scores = torch.where(mask, scores, FILL)
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        return weights @ V, weights
'''


def test_a_fill_tensor_made_without_device_is_caught_on_a_machine_without_a_gpu():
    """`torch.full(shape, -inf)` without device= takes part only when there is a mask: the probe of every
    case (not just the first) catches it."""
    src = MASKED_ATTENTION_WITH_FILL.replace("FILL", 'torch.full(scores.shape, float("-inf"), dtype=scores.dtype)')
    with worker_for("04_masks_attention", {"masked_attention": src}) as w:
        fn = w.function("masked_attention", "masked_attention")
        check("masked_attention", fn, "basic")  # right on the CPU...
        msg = failure("masked_attention", fn, "hidden")  # ...but not on the device of its inputs
        assert "device" in msg, msg


def test_a_0_dim_cpu_tensor_mixes_with_any_device_and_is_allowed():
    """PyTorch mixes a 0-dim CPU tensor with a tensor of any device, so the probe does not count it."""
    from helpers import as_learner
    src = MASKED_ATTENTION_WITH_FILL.replace("FILL", 'torch.tensor(float("-inf"), dtype=scores.dtype)')
    fn = as_learner({"masked_attention": textwrap.dedent(src)})["masked_attention"]
    for part in learner.check.parts_of("masked_attention"):
        check("masked_attention", fn, part)


def test_course_grade_without_bwrap_stops_naming_the_package(monkeypatch, tmp_path, capsys):
    from coursekit import cli
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("COURSE_ISOLATION", raising=False)
    assert cli.main(["grade"]) == 2
    assert "bubblewrap" in capsys.readouterr().err


# ---------------------------------------------------------------- the judge, forked per submission
def _judge_request(notebook, overrides=None):
    names = [name for name, ex in EXERCISES.items() if ex.notebook == notebook]
    cells = [textwrap.dedent((overrides or {}).get(name) or solution_source(name)) for name in names]
    checks = [[f"{name}_{part}", name, name, part] for name in names for part in learner.check.parts_of(name)]
    return {"prelude": setup_source(notebook), "cells": cells, "checks": checks, "seed": 5}


def _fresh_judge(request):
    proc = subprocess.run([sys.executable, "-I", "-m", "grader.judge"], input=json.dumps(request),
                          capture_output=True, text=True, timeout=600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _forked_judge(request, timeout=600):
    judged = judge.judge(request, dict(os.environ), timeout)  # its verdict: verdict.json, never read from stdout
    return judged.verdict, judged.code


@pytest.mark.pipeline  # real judges of whole notebooks: make test, not test-fast
def test_a_forked_judge_gives_the_verdict_a_fresh_judge_gives_and_sees_no_earlier_submission():
    """The judge server's children decide exactly what a judge started afresh decides, whatever came before."""
    buggy = _judge_request("03_softmax", {"softmax": edited_source("softmax", "z = x / temperature",
                                                                    "z = x * temperature")})
    right = _judge_request("03_softmax")
    first, code = _forked_judge(buggy)
    assert code == 0 and not first["results"]["softmax_basic"][0]
    assert "multiplied by the temperature" in first["results"]["softmax_basic"][1]  # the mistake is named
    server = judge._SERVER.process.proc.pid
    second, _ = _forked_judge(right)
    assert judge._SERVER.process.proc.pid == server  # one server, two children
    assert second["results"] == _fresh_judge(right)["results"]  # the buggy one before it left nothing behind
    assert all(ok for ok, _ in second["results"].values())


@pytest.mark.pipeline  # real judges of whole notebooks: make test, not test-fast
def test_a_judge_past_its_time_is_stopped_and_the_server_judges_the_next_submission():
    loop = edited_source("softmax", "z = x / temperature", "while True:\n        pass")
    verdict, code = _forked_judge(_judge_request("03_softmax", {"softmax": loop}), timeout=3)
    assert verdict is None and code is None
    verdict, code = _forked_judge(_judge_request("03_softmax"))
    assert code == 0 and all(ok for ok, _ in verdict["results"].values())


@pytest.mark.pipeline  # real judges of whole notebooks: make test, not test-fast
def test_a_judge_server_that_died_is_started_again():
    if judge._SERVER.process is None or not judge._SERVER.process.alive():
        _forked_judge(_judge_request("02_dot_products"))
    dead = judge._SERVER.process.proc
    dead.kill()
    dead.wait()
    verdict, code = _forked_judge(_judge_request("02_dot_products"))
    assert code == 0 and all(ok for ok, _ in verdict["results"].values()) and judge._SERVER.process.proc is not dead


@pytest.mark.pipeline  # real judges of whole notebooks: make test, not test-fast
def test_a_forked_judges_verdict_is_a_record_of_its_own_not_a_line_scanned_from_what_it_printed():
    judged = judge.judge(_judge_request("02_dot_products"), dict(os.environ), 600)
    assert judged.code == 0 and judged.verdict["isolated"] and all(ok for ok, _ in judged.verdict["results"].values())
    assert '"results"' not in judged.stdout  # its verdict.json, whole; stdout.txt and stderr.txt are for diagnosis


# ---------------------------------------------------------------- the ready-made version of an exercise
def _masked_attention_worker(routes, hide):
    """One sandboxed worker holding notebook 04's answers, with ``masked_attention`` written each way of ``routes``
    (each route as a function of its own name, ``route_<n>``)."""
    cells = [solution_source(name) for name, ex in EXERCISES.items()
             if ex.notebook == "04_masks_attention" and name != "masked_attention"]
    for n, route in enumerate(routes):
        cells.append(textwrap.dedent(READY_MADE_ROUTES[route]).replace("def masked_attention(", f"def route_{n}("))
    return remote.Worker(setup_source("04_masks_attention"), cells, hide=hide)


@pytest.fixture(scope="module")
def hidden_04():
    """Notebook 04 graded: every route to its ready-made masked_attention in one sandboxed worker (one start)."""
    hide = judge.ready_made([["masked_attention_basic", "masked_attention", "masked_attention", "basic"]])
    with _masked_attention_worker(list(READY_MADE_ROUTES), hide) as w:
        yield w


def test_a_notebooks_ready_made_versions_are_hidden_while_it_is_graded_and_there_after():
    """What the judge hides is every ready-made version of the notebook's own exercises, and none of an earlier
    notebook's (which the later notebooks' set-up cells import)."""
    hidden_04 = judge.ready_made([["masked_attention_basic", "masked_attention", "masked_attention", "basic"]])
    assert hidden_04 == ["learner.blocks:masked_attention"]
    hidden_06 = judge.ready_made([["encoder_block_basic", "encoder_block", "encoder_block", "basic"]])
    from learner.syllabus import NOTEBOOKS
    assert set(hidden_06) == {g for gs in NOTEBOOKS["06_encoder"].given.values() for g in gs}
    assert "learner.blocks:masked_attention" not in hidden_06  # 04's: 06's set-up cell imports it
    assert judge.ready_made([["x", "softmax", "softmax", "basic"]]) == []


@pytest.mark.parametrize("route", list(READY_MADE_ROUTES))
def test_the_ready_made_version_of_the_exercise_earns_nothing_by_any_route(hidden_04, route):
    """Copies of its code (FunctionType, marshal), wrappers (partial, wraps), calls from a thread, a generator or
    map, the profiler off or replaced, its source exec'd, its compiled file loaded, the module reloaded: while
    notebook 04 is graded, learner.blocks.masked_attention is not in the sandbox, so every route fails in words."""
    fn = hidden_04.function(f"route_{list(READY_MADE_ROUTES).index(route)}", "masked_attention")
    assert fn is not None
    for part in ("basic", "edge"):
        msg = failure("masked_attention", fn, part)
        assert msg.startswith("FAILED masked_attention"), msg


SLIP_PAST_THE_WATCH = ("copy-of-its-code", "from-a-thread-profiler-off", "profiler-replaced")


def test_without_hiding_three_routes_to_the_ready_made_version_would_have_passed(capsys):
    """A copy of its code (a new code object), a call from a thread with the profiler off, and a call with the
    profiler replaced slip past the watch on calls: in a sandbox that does not hide the ready-made version (a later
    notebook's) each earns the part, so the hiding is what stops them above."""
    with _masked_attention_worker(SLIP_PAST_THE_WATCH, ()) as w:
        for n, route in enumerate(SLIP_PAST_THE_WATCH):
            check("masked_attention", w.function(f"route_{n}", "masked_attention"), "basic")  # no CheckFailed
            assert "PASSED masked_attention" in capsys.readouterr().out, route


def test_the_sandboxs_process_list_shows_no_host_path(tmp_path):
    """Nothing of the grading machine's folders in any process's command line: not bwrap's options (read from a
    file that is gone), not Python's path (bound at /opt/course/python), not the kernel's folder."""
    project = ROOT
    proc = run_in_sandbox('''
        import os
        for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
            print(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
    ''', tmp_path)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) >= 2 and lines[0].startswith("/usr/bin/bwrap --args 3 --"), proc.stdout + proc.stderr
    for host in (project, str(tmp_path), os.path.realpath(sys.prefix), "/tmp/"):
        assert host not in proc.stdout, (host, proc.stdout)


def _running_as(uid):
    """A process of ``uid`` (``sleep``), once it runs as that user (setpriv switches after it starts)."""
    proc = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "30"])
    for _ in range(500):
        if os.stat(f"/proc/{proc.pid}").st_uid == uid:
            break
        time.sleep(0.01)
    return proc


def test_sandboxes_at_the_same_time_never_share_a_user_and_a_users_leftover_process_keeps_it_taken():
    """As root each sandbox claims a uid of its own (held while it lives), with control groups capping its processes
    and memory; giving a uid back kills what still runs as it, and a uid that has a process all the same (one
    started after, outside any sandbox) is not handed out. As a plain user, the user's own uid."""
    if os.geteuid() != 0:
        assert sandbox.claim().uid == os.getuid()
        return
    first, second = sandbox.claim(), sandbox.claim()
    try:
        assert first.uid != second.uid
        for group in first.groups:  # this machine's grader may make them: each caps this sandbox alone
            assert os.path.basename(group) == f"course-sandbox-{first.uid}"
        leftover = _running_as(first.uid)
        try:
            first.release()  # kills it
            assert leftover.wait(timeout=10) == -9
            stray = _running_as(first.uid)
            try:
                third = sandbox.claim()  # first.uid is free of its lock, but a process of it is alive
                assert third.uid not in (first.uid, second.uid)
                third.release()
            finally:
                stray.kill()
                stray.wait()
        finally:
            leftover.kill()
            leftover.wait()
    finally:
        first.release()
        second.release()
