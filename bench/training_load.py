"""Two notebooks training side by side: each one's time against its time alone, and the same figures.

    .venv/bin/python bench/training_load.py [--steps 300] [--threads 1]

Two training runs of the course, each in a process of its own as two notebooks' kernels would be:

* ``05b``: notebook 05b's loop (Adam, one-cycle, clipping) on the RNN with attention, the reference's decoder step;
* ``08``: notebook 08's ``transformer.fit`` on the encoder-decoder transformer.

Each runs alone, then both at once; the script prints each one's wall time alone and side by side, the ratio
(side by side / alone: 2 on 2 busy cores means each got one core, more means they got in each other's way),
and whether the losses of every step came out the same. ``--threads`` is the torch thread count of the
training loops (``COURSE_TRAIN_THREADS``; the course's default is 1): ``--threads 2`` shows what two threads
per run did beside other work. Run it on an otherwise quiet machine: other work on the cores counts as load.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def worker(name, steps):
    """One training run; prints {"seconds", "cpu", "losses"} as JSON on its last line."""
    import torch
    from torch import nn

    from learner import capstone_runs as capstone, data, rnn_models as rnn, transformer
    from learner.training import progress, training_threads

    task = data.make_date_task(n_train=20000, n_val=10, n_test=10, seed=0)
    if name == "08":
        run = capstone.build("encoder_decoder", 64, task, seed=0)
        start, cpu = time.perf_counter(), time.process_time()
        losses = [loss for _, loss in transformer.fit(run.model, run.loss, data.shuffled(task.train, 64, 0),
                                                      steps=steps, report_every=steps)]
    else:
        from solutions.rnn_attention import attention_decoder_step
        model = rnn.AttentionSeq2Seq(len(task.src_vocab), len(task.tgt_vocab), D=32, d_h=128, d_a=64, seed=0,
                                     step=attention_decoder_step)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
        stream = data.batches(task.train, 128, task.src_vocab, task.tgt_vocab, seed=0)
        losses, start, cpu = [], time.perf_counter(), time.process_time()
        with training_threads(), progress(steps, desc="05b") as bar:
            for _ in range(steps):
                b = next(stream)
                logits = model(b["src"], b["src_mask"], b["tgt_in"])
                loss = nn.functional.cross_entropy(logits.transpose(1, 2),
                                                   b["tgt_out"].masked_fill(~b["tgt_mask"], -100))
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
                bar.update(1)
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu, "losses": losses}))


def launch(name, steps, threads):
    env = dict(os.environ, COURSE_TRAIN_THREADS=str(threads))
    env.pop("COURSE_MAX_TRAIN_STEPS", None)
    return subprocess.Popen([sys.executable, __file__, "--worker", name, "--steps", str(steps)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def collect(proc):
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a training run failed (exit {proc.returncode}):\n{out}")
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per training run (default 1)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.steps)
    names = ("05b", "08")
    print(f"{args.steps} training steps per run, {args.threads} torch thread(s) per run, "
          f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at the start")
    alone = {n: collect(launch(n, args.steps, args.threads)) for n in names}
    procs = {n: launch(n, args.steps, args.threads) for n in names}
    together = {n: collect(p) for n, p in procs.items()}
    worst = 0.0
    print(f"{'run':5} {'alone s':>8} {'side by side s':>15} {'ratio':>6} {'CPU s alone / side by side':>27}  "
          f"same losses")
    for n in names:
        ratio = together[n]["seconds"] / alone[n]["seconds"]
        worst = max(worst, ratio)
        same = together[n]["losses"] == alone[n]["losses"]
        print(f"{n:5} {alone[n]['seconds']:8.1f} {together[n]['seconds']:15.1f} {ratio:6.2f} "
              f"{alone[n]['cpu']:13.1f} / {together[n]['cpu']:<11.1f}  {'yes' if same else 'NO'}")
    print(f"worst ratio {worst:.2f} (at most 2.5 asked; 2.0 is two runs sharing 2 cores fairly)")


if __name__ == "__main__":
    main()
