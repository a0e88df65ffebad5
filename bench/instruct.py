"""Notebook 15 over seeds 0-5: instruction tuning on 3, 9 and all training tasks, the loss on the answer
against the loss on every token, and the notebook's own claims (its source run with `SEED = 0` replaced).

The sweep calls the notebook's functions directly (plmcourse.nn.instruct, the same settings as the notebook:
800 steps of 64 examples, lr 5e-3, half the answers chatty); each seed has its own task split. The notebook
runs are recorded with their failed assertions, not hidden (allow_errors).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import run_notebook_variant, write_result
from plmcourse.data import instruct as data
from plmcourse.nn import instruct as inn

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "course" / "source" / "15_from_gpt3_to_chatgpt" / "15_from_gpt3_to_chatgpt.ipynb"
SEEDS = list(range(6))
N_TASKS = [3, 9, 36]
REPORT = """
import json as _json
print(_json.dumps({"sft": sft_accuracy, "short": float(np.mean(start == 2)), "reward model": rm_accuracy,
                   "dpo": {str(b): r for b, r in dpo_results.items()},
                   "dpo seconds": {str(b): t for b, t in dpo_seconds.items()}, "ppo": ppo_result,
                   "ppo score": {"first step": ppo_steps[0]["score"],
                                 "last 5 steps": float(np.mean([r["score"] for r in ppo_steps[-5:]]))},
                   "ppo kl": ppo_steps[-1]["kl"], "ppo seconds": ppo_steps[-1]["seconds"],
                   "chatty": chatty, "reward model prefers long": prefers_long,
                   "reward weights": [float(v) for v in rm_for_ppo]}))
"""


def sft_run(seed, n_tasks, answer_only=True):
    """Held-out, trained-task and unseen-family accuracy of the notebook's SFT on the first n_tasks tasks."""
    device = torch.device("cpu")
    train_tasks, held, unseen = data.task_split(seed)
    model = inn.instruction_gpt(seed, device)
    inn.train_sft(model, train_tasks[:n_tasks], device, steps=800, batch_size=64, lr=5e-3, seed=seed,
                  p_verbose=0.5, answer_only=answer_only, progress=False)
    rng = np.random.default_rng(seed + 1000)
    seen = data.instruction_examples(train_tasks[:n_tasks], 300, rng)
    held_out = data.instruction_examples(held, 300, rng)
    return {"trained tasks": inn.accuracy(model, seen, device), "held-out tasks": inn.accuracy(model, held_out, device),
            "unseen family": inn.accuracy(model, data.instruction_examples(unseen, 100, rng), device)}


def sweep(seeds=SEEDS):
    """SFT on the first 3 and 9 training tasks, and on all of them with the loss on every token, per seed."""
    out = {"families": {str(n): [] for n in N_TASKS[:-1]}, "every token": []}
    start = time.perf_counter()
    for seed in seeds:
        for n in N_TASKS[:-1]:
            out["families"][str(n)].append(sft_run(seed, n))
        out["every token"].append(sft_run(seed, N_TASKS[-1], answer_only=False)["held-out tasks"])
        print(f"[instruct] sweep, seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    return out


def notebook_runs(seeds=SEEDS):
    """The notebook at each seed: its report (all 36 tasks, answer-only loss: the sweep's last point) and errors."""
    runs = {}
    for seed in seeds:
        report, failed, seconds = run_notebook_variant(NOTEBOOK, seed, REPORT)
        runs[str(seed)] = {"report": report, "failed assertions": failed, "seconds": round(seconds, 1)}
        print(f"[instruct] notebook at seed {seed}: {seconds:.0f} s, failed: {failed}", flush=True)
    return runs


def combine(swept, runs):
    """The result file's payload from the sweep and the notebook runs (seeds in order)."""
    seeds = sorted(int(s) for s in runs)
    families = {**swept["families"], str(N_TASKS[-1]): [runs[str(s)]["report"].get("sft") for s in seeds]}
    return {"title": "Instruction tuning and preferences over seeds (notebook 15)",
            "notes": "CPU. Accuracy: greedy answer correct (short or long) on 300 new inputs. families: the "
                     "notebook's SFT (800 steps of 64, lr 5e-3, half the answers chatty) on the first n of a seed's "
                     f"{N_TASKS[-1]} training tasks ({N_TASKS[-1]}: the notebook's own run). loss_on: all tasks, the "
                     "loss on the answer only (the notebook) or on every non-padding token. notebooks: the notebook "
                     "at each seed, with any assertion that failed.",
            "seeds": seeds, "n_tasks": N_TASKS, "families": families,
            "loss_on": {"answer only": [f["held-out tasks"] for f in families[str(N_TASKS[-1])]],
                        "every token": swept["every token"]},
            "notebooks": runs}


def main(seeds=SEEDS):
    torch.set_num_threads(1)  # tiny models: one thread wastes nothing and leaves the other core free
    payload = combine(sweep(seeds), notebook_runs(seeds))
    payload["rows"] = rows(payload)
    return write_result("instruct", payload)


def _spread(values):
    values = [v for v in values if v is not None]
    return f"{np.mean(values):.0%} ({min(values):.0%}-{max(values):.0%})" if values else ""


def _range(values):
    return f"{np.mean(values):.1f} ({min(values):.1f} to {max(values):.1f})"


def rows(payload):
    """One row per measurement: mean (min-max) over the seeds."""
    out = []
    for n in payload.get("n_tasks", []):
        runs = payload["families"][str(n)]
        out.append({"measurement": f"SFT on {n} tasks", **{k: _spread([r[k] for r in runs]) for k in runs[0]}})
    for key, values in payload.get("loss_on", {}).items():
        out.append({"measurement": f"SFT on all tasks, loss on {key}", "held-out tasks": _spread(values)})
    reports = [r["report"] for r in payload.get("notebooks", {}).values() if r["report"]]
    if reports:
        out.append({"measurement": "notebook: SFT", **{k: _spread([r["sft"][k] for r in reports])
                                                       for k in reports[0]["sft"]},
                    "short and correct": _spread([r["short"] for r in reports]),
                    "reward model pair accuracy": _spread([r["reward model"] for r in reports])})
        for beta in reports[0]["dpo"]:
            runs = [r["dpo"][beta] for r in reports]
            out.append({"measurement": f"notebook: DPO beta={beta}",
                        "win rate": _spread([r["win rate"] for r in runs]),
                        "short and correct": _spread([r["short and correct"] for r in runs]),
                        "held-out tasks": _spread([r["held-out correct"] for r in runs]),
                        "log-ratio chosen": _range([r["log-ratio chosen"] for r in runs]),
                        "log-ratio rejected": _range([r["log-ratio rejected"] for r in runs])})
        runs = [r.get("ppo") for r in reports]
        if all(runs):
            out.append({"measurement": "notebook: PPO, kl=0.1 (40 steps of 64)",
                        "win rate": _spread([r["win rate"] for r in runs]),
                        "short and correct": _spread([r["short and correct"] for r in runs]),
                        "held-out tasks": _spread([r["held-out correct"] for r in runs]),
                        "log-ratio chosen": _range([r["log-ratio chosen"] for r in runs]),
                        "log-ratio rejected": _range([r["log-ratio rejected"] for r in runs]),
                        "reward-model score, first step / last 5": " / ".join(
                            _range([r["ppo score"][k] for r in reports]) for k in ("first step", "last 5 steps")),
                        "seconds (PPO / DPO at beta=1)": f"{_range([r['ppo seconds'] for r in reports])} / "
                                                         f"{_range([r['dpo seconds']['1.0'] for r in reports])}",
                        "answers ending in the chatter (SFT / PPO)": " / ".join(
                            _spread([r["chatty"][k] for r in reports]) for k in ("SFT", "PPO")),
                        "reward model scores PPO's long form higher": _spread(
                            [r["reward model prefers long"] for r in reports])})
        failed = {seed: r["failed assertions"] for seed, r in payload["notebooks"].items() if r["failed assertions"]}
        seconds = [r["seconds"] for r in payload["notebooks"].values()]
        out.append({"measurement": "notebook runs", "seeds": len(seconds),
                    "seconds": f"{min(seconds):.0f}-{max(seconds):.0f}",
                    "failed assertions": json.dumps(failed) if failed else "none"})
    return out


if __name__ == "__main__":
    import sys

    # `python -m bench.instruct PART OUT SEED...` runs one part ("sweep" or "notebooks") for some seeds into OUT
    # (JSON), so that parts can run side by side; `python -m bench.instruct` (or `python -m bench instruct`)
    # runs everything.
    if len(sys.argv) > 2:
        torch.set_num_threads(1)
        part, out, seeds = sys.argv[1], Path(sys.argv[2]), [int(s) for s in sys.argv[3:]]
        out.write_text(json.dumps(sweep(seeds) if part == "sweep" else notebook_runs(seeds)))
    else:
        print(main())
