"""What the pipeline tests share besides their fixtures (tests/coursekit/pipeline/conftest.py): the course copies every
test worker of a run shares, grading a class as the tests do, and the sample submissions of each notebook with the
bugs they carry."""
import fcntl
import json
import os
import subprocess
import sys
import textwrap

import nbformat
from helpers import TOGETHER

from coursekit.grading import grade_class
from coursekit.hub.setup import free_port
from coursekit.pipeline import CourseCopy, assignments
from coursekit.samples import ONE_BUG, answered, edited_source

ASSIGNMENTS = assignments()


class Courses:
    """Course copies that every xdist worker of this run shares: one per assignment, released once and graded
    once, whichever worker asks first (a file lock makes the others wait, then read what it wrote).

    ``courses[a]`` is the copy of assignment ``a``; ``courses.release_path(a)`` and the other paths are its.
    Each copy has its own gradebook, so two workers grading two assignments never share a SQLite file.
    """

    def __init__(self, folder):
        self.folder = folder

    def once(self, name, build):
        """``build()`` (returning JSON data) run once per test run; everyone gets its result."""
        result = os.path.join(self.folder, f"{name}.json")
        with open(os.path.join(self.folder, f"{name}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(result):
                data = build()
                with open(result + ".tmp", "w") as f:
                    json.dump(data, f)
                os.replace(result + ".tmp", result)
            with open(result) as f:
                return json.load(f)

    def copy(self, name, *assignments):
        """The course copy ``name`` with ``assignments`` released in it."""
        root = os.path.join(self.folder, name)

        def release():
            cc = with_test_env(CourseCopy(root))
            for a in assignments:
                cc.generate_release(a)
            return root
        self.once(f"{name}-released", release)
        return with_test_env(CourseCopy.existing(root))

    def __getitem__(self, a):
        """The copy where ``a``'s samples are graded: the one the ``TOGETHER`` assignments share, or ``a``'s own."""
        return self.copy("course-together", *TOGETHER) if a in TOGETHER else self.copy(f"course-{a}", a)

    def release_path(self, a):
        return self[a].release_path(a)

    def feedback_path(self, student, a):
        return self[a].feedback_path(student, a)


def with_test_env(cc):
    """Graded as a class is (training capped, one torch thread: the test workers share 2 cores), with a sandbox
    memory limit that three side by side leave room for."""
    cc.for_class_grading().env["COURSE_SANDBOX_MEMORY_MB"] = "4096"
    return cc


def release_nb(course, a):
    return nbformat.read(course.release_path(a), as_version=4)


def total(scores):
    return sum(s for s, _ in scores.values())


def grade(cc, a, students, cluster):
    """Grade ``students``' submissions of ``a`` in ``cc`` with the parallel grader; returns its summary."""
    summary = grade_class(cc.root, [a], scheduler=cluster(), timeout=900, env=cc.env, progress=False,
                          release_first=False, only_students=students)
    assert set(summary.graded) == {(s, a) for s in students}, summary.problems
    return summary


def grade_on_a_dask_cluster(cc, assignments, log_path, workers=2):
    """`course grade --scheduler ADDRESS --course ROOT --no-progress A B C` on the README's cluster of grading
    machines, here on 127.0.0.1: `dask scheduler`, then `dask worker ADDRESS --nworkers N --nthreads 1
    --memory-limit 0`, each started as the README writes it. Returns the finished `course grade` process."""
    from helpers import stop_group
    bin_dir = os.path.dirname(sys.executable)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    with open(log_path, "w") as logs:
        scheduler = subprocess.Popen([os.path.join(bin_dir, "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                                      str(port), "--dashboard-address", "127.0.0.1:0"], stdout=logs, stderr=logs,
                                     start_new_session=True)
        cluster = subprocess.Popen([os.path.join(bin_dir, "dask"), "worker", address, "--nworkers", str(workers),
                                    "--nthreads", "1", "--memory-limit", "0"], stdout=logs, stderr=logs,
                                   start_new_session=True)
        try:
            from distributed import Client
            with Client(address, timeout="120s") as client:  # every worker has joined before grading starts
                client.wait_for_workers(workers, timeout=300)
            return subprocess.run([COURSE_COMMAND, "grade", "--scheduler", address, "--course", cc.root,
                                   "--no-progress", *assignments], capture_output=True, text=True, timeout=1500,
                                  env=cc.env)
        finally:
            for p in (cluster, scheduler):
                stop_group(p, wait=60)


COURSE_COMMAND = os.path.join(os.path.dirname(sys.executable), "course")  # the README's `.venv/bin/course`


def bug_students(a):
    """(the student with the known bug of ``a``, the student with its learner-written bug): one submission holds
    both when they sit in two exercises (a bug costs only its own exercise, so each is checked on its own there),
    two when they sit in the same one."""
    return ("sample-bugs", "sample-bugs") if SECOND_BUG[a][0] != ONE_BUG[a].exercise else ("sample-bug1",
                                                                                           "sample-bug2")


# The notebooks whose untouched release is graded here through nbgrader (the class report and the grades export
# read 03's); `course demo 01_tokens 02_dot_products 03_softmax` (tests/coursekit/test_cli.py) grades those three
# untouched releases through nbgrader too and checks each scores 0. For every notebook, each part of each exercise
# is asserted to fail on its released stub in-process (tests/learner/check/test_checks.py), and 09's untouched release
# runs through nbgrader's validator (test_pipeline.py).
UNTOUCHED = ("03_softmax",)


def sample_submissions(release, a):
    """{student: notebook}: every answer right, the untouched release (``UNTOUCHED`` only), and the two bugs (see
    ``bug_students``)."""
    bug = ONE_BUG[a]
    known = {bug.exercise: edited_source(bug.exercise, *bug.edit)}
    written = {SECOND_BUG[a][0]: textwrap.dedent(SECOND_BUG[a][1]).strip()}
    out = {"sample-reference": answered(release)}
    if a in UNTOUCHED:
        out["sample-untouched"] = release
    if bug_students(a)[0] == bug_students(a)[1]:
        out["sample-bugs"] = answered(release, {**known, **written})
    else:
        out.update({"sample-bug1": answered(release, known), "sample-bug2": answered(release, written)})
    return out


# A second bug per notebook, written as a learner would write it (not one of the grader's variants).
SECOND_BUG = {
    "01_tokens": ("encode", '''
        def encode(text, vocab):
            return [vocab.get(w, vocab["<unk>"]) for w in text.lower().split()]
    ''', "lack <bos> at the start"),
    "02_dot_products": ("project_qkv", '''
        def project_qkv(X, W_Q, W_K, W_V):
            for W in (W_Q, W_K, W_V):
                if W.shape[1] != X.shape[-1]:
                    raise ValueError("width")
            if W_Q.shape[0] != W_K.shape[0]:
                raise ValueError("d_k")
            return X @ W_Q.T, X @ W_V.T, X @ W_K.T
    ''', "K and V are swapped"),
    "03_softmax": ("sequence_log_prob", '''
        def sequence_log_prob(logits, targets, mask=None):
            if logits.dim() != 3 or targets.shape != logits.shape[:2] or targets.dtype != torch.long:
                raise ValueError("shapes")
            lp = torch.log_softmax(logits, -1).gather(-1, targets.clamp_min(0)[..., None])[..., 0]
            return lp.mean(-1) * targets.shape[-1] if mask is None else (lp * mask).sum(-1) / mask.sum(-1).clamp_min(1)
    ''', "averaged"),
    "04_masks_attention": ("causal_mask", '''
        def causal_mask(T, device=None):
            if T < 0:
                raise ValueError("T")
            return torch.triu(torch.ones(T, T, dtype=torch.bool, device=device))
    ''', "upper-triangular"),
    "05_rnn": ("seq2seq_loss", '''
        def seq2seq_loss(logits, targets, mask=None):
            if logits.dim() != 3 or targets.shape != logits.shape[:2]:
                raise ValueError("logits must be (B, T_y, V) and targets (B, T_y)")
            if mask is not None and mask.shape != targets.shape:
                raise ValueError("mask must be (B, T_y)")
            if mask is not None:
                targets = targets.masked_fill(~mask, -100)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
    ''', "averaged over the real tokens"),
    "05b_rnn_attention": ("dot_score", '''
        def dot_score(h_dec, states):
            if h_dec.dim() != 2 or states.dim() != 3 or h_dec.shape[0] != states.shape[0] \\
                    or h_dec.shape[1] != states.shape[2]:
                raise ValueError("shapes")
            return torch.einsum("bh,bth->bt", h_dec, states) / math.sqrt(h_dec.shape[1])
    ''', "divided by sqrt(d_dec)"),
    "06_encoder": ("sinusoidal_positions", '''
        def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
            if T < 0 or D < 1:
                raise ValueError(f"T={T}, D={D}")
            pos = torch.arange(T, dtype=torch.float64, device=device)[:, None]
            freq = base ** (-torch.arange(0, D, 2, dtype=torch.float64, device=device) / D)
            table = torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)[:, :D]
            return table.to(dtype)
    ''', "two halves"),
    "07_decoder": ("rope_attention", '''
        def rope_attention(x, params, n_heads, mask=None):
            q = rope(split_heads(x @ params["W_q"].T + params["b_q"], n_heads))
            k = rope(split_heads(x @ params["W_k"].T + params["b_k"], n_heads))
            v = rope(split_heads(x @ params["W_v"].T + params["b_v"], n_heads))
            if mask is not None:
                while mask.dim() < 3:
                    mask = mask[None]
                mask = mask[:, None]
            out, w = masked_attention(q, k, v, mask)
            return merge_heads(out) @ params["W_o"].T + params["b_o"], w
    ''', "the values were rotated too"),
    # in another exercise than the sample bug, so one submission holds both (the loss is used by no graded cell)
    "08_encoder_decoder": ("translation_loss", '''
        def translation_loss(encode, cross_kv, run_decoder, batch):
            logits = encdec_forward(encode, cross_kv, run_decoder, batch["src"], batch["src_mask"], batch["tgt_in"],
                                    batch["tgt_mask"])
            return F.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten())
    ''', "the padding was counted"),
    "09_kv_cache": ("greedy_generate", '''
        def greedy_generate(step, prompt, eos_id, max_len):
            if prompt.shape[1] == 0 or max_len < 0:
                raise ValueError("bad prompt or max_len")
            text, cache, out = prompt, None, []
            while len(out) < max_len:
                logits, cache = step(text, cache)
                nxt = logits[:, -1].argmax(-1)
                if out:
                    nxt = nxt.masked_fill((torch.stack(out, 1) == eos_id).any(1), 0)
                out.append(nxt)
                if (torch.stack(out, 1) == eos_id).any(1).all():
                    break
                text = torch.cat([text, out[-1][:, None]], dim=1)
            return torch.stack(out, 1) if out else prompt[:, :0]
    ''', "the whole text was fed again at every step"),
    # a wrong answer to a question: in another graded cell than the sample bug, so one submission holds both
    "10_capstone": ("answer_pairs_the_prefix_adds", '''
        def answer_pairs_the_prefix_adds():
            return 15
    ''', "15 are the pairs the causal mask already allows"),
}
