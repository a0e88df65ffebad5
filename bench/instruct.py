"""Notebook 15 over seeds 0-5 and fresh ones: instruction tuning on 5, 9, 19 and all 36 training tasks, the
loss on the answer against the loss on every token, and the notebook's own claims (its source run with `SEED = 0`
replaced).

The sweep calls the notebook's functions directly (plmcourse.nn.instruct, the same settings as the notebook:
800 steps of 64 examples, lr 5e-3, half the answers chatty); each seed has its own task split. A run on n tasks
takes them spread over the families (data.spread_over_families: one of each family before a second of any), so
that a small task count covers every family the held-out tasks come from: drawn at random instead, the first 3
tasks were nearly always replacements, and a held-out "drop" or "count" task then asked for a word the model had
never met (the earlier sweep's numbers are kept in the result as "random draw"). The family never trained on
("sort") is measured at every count: it is the analogue of FLAN's held-out cluster. The notebook runs are recorded
with their failed assertions, not hidden (allow_errors).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from bench.claims import fresh_seeds
from bench.common import run_notebook_variant, write_result
from plmcourse.data import instruct as data
from plmcourse.nn import instruct as inn

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "course" / "source" / "15_from_gpt3_to_chatgpt" / "15_from_gpt3_to_chatgpt.ipynb"
SEEDS = list(range(6))
N_TASKS = [5, 9, 19, 36]  # 5: one task of each trained family; 19: all of the other families' and 5 of replace's
N_RANDOM = [3, 9]  # the control: the first n tasks of a seed's random order, whatever their families
REPORT = """
import json as _json
print(_json.dumps({"sft": sft_accuracy, "short": float(np.mean(start == 2)), "reward model": rm_accuracy,
                   "reward model where the SFT model writes wrong": judged_where_written_wrong,
                   "dpo": {str(b): r for b, r in dpo_results.items()},
                   "dpo seconds": {str(b): t for b, t in dpo_seconds.items()}, "ppo": ppo_result,
                   "ppo score": {"first step": ppo_steps[0]["score"],
                                 "last 5 steps": float(np.mean([r["score"] for r in ppo_steps[-5:]]))},
                   "ppo kl": ppo_steps[-1]["kl"], "ppo seconds": ppo_steps[-1]["seconds"],
                   "chatty": chatty, "reward model prefers long": prefers_long,
                   "reward weights": [float(v) for v in rm_for_ppo]}))
"""


def sft_run(seed, n_tasks, answer_only=True, spread=True):
    """Held-out, trained-task and unseen-family accuracy of the notebook's SFT on n_tasks training tasks, spread
    over the families (spread=False: the first n_tasks of the seed's random order)."""
    device = torch.device("cpu")
    train_tasks, held, unseen = data.task_split(seed)
    train_tasks = data.spread_over_families(train_tasks, n_tasks) if spread else train_tasks[:n_tasks]
    model = inn.instruction_gpt(seed, device)
    inn.train_sft(model, train_tasks, device, steps=800, batch_size=64, lr=5e-3, seed=seed,
                  p_verbose=0.5, answer_only=answer_only, progress=False)
    rng = np.random.default_rng(seed + 1000)
    seen = data.instruction_examples(train_tasks, 300, rng)
    held_out = data.instruction_examples(held, 300, rng)
    return {"trained tasks": inn.accuracy(model, seen, device), "held-out tasks": inn.accuracy(model, held_out, device),
            "unseen family": inn.accuracy(model, data.instruction_examples(unseen, 100, rng), device)}


def sweep(seeds=SEEDS, control=True):
    """Per seed: SFT on 5, 9 and 19 tasks spread over the families, on all of them with the loss on every token,
    and (control) on the first 3 and 9 tasks drawn at random."""
    out = {"families": {str(n): [] for n in N_TASKS[:-1]}, "every token": [],
           "random draw": {str(n): [] for n in N_RANDOM} if control else {}}
    start = time.perf_counter()
    for seed in seeds:
        for n in N_TASKS[:-1]:
            out["families"][str(n)].append(sft_run(seed, n))
        out["every token"].append(sft_run(seed, N_TASKS[-1], answer_only=False)["held-out tasks"])
        for n in out["random draw"]:
            out["random draw"][n].append(sft_run(seed, int(n), spread=False))
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


def combine(swept, runs, seeds, fresh_swept=None, fresh_sft=None, fresh=()):
    """The result file's payload from the sweep and the notebook runs at the development `seeds`, and the sweep
    (fresh_swept) and the notebook's SFT accuracies (fresh_sft: one dict per seed) at the `fresh` seeds."""
    families = {**swept["families"], str(N_TASKS[-1]): [runs[str(s)]["report"].get("sft") for s in seeds]}
    payload = {
        "title": "Instruction tuning and preferences over seeds (notebook 15)",
        "notes": "CPU. Accuracy: greedy answer correct (short or long) on 300 new inputs. families: the notebook's "
                 "SFT (800 steps of 64, lr 5e-3, half the answers chatty) on n of a seed's "
                 f"{N_TASKS[-1]} training tasks spread over the families (data.spread_over_families: one task of "
                 f"each family before a second of any; {N_TASKS[-1]}: the notebook's own run). random draw: the "
                 "first n of the seed's random order instead, as the earlier sweep drew them. loss_on: all tasks, "
                 "the loss on the answer only (the notebook) or on every non-padding token. notebooks: the "
                 "notebook at each development seed, with any assertion that failed. fresh: the same at seeds drawn "
                 "at random on the run (the notebook's SFT numbers at them from its own run).",
        "seeds": list(seeds), "n_tasks": N_TASKS, "families": families, "random draw": swept["random draw"],
        "loss_on": {"answer only": [f["held-out tasks"] for f in families[str(N_TASKS[-1])]],
                    "every token": swept["every token"]},
        "notebooks": runs}
    if fresh:
        payload["fresh"] = {"seeds": list(fresh),
                            "families": {**fresh_swept["families"], str(N_TASKS[-1]): list(fresh_sft)},
                            "loss_on": {"answer only": [f["held-out tasks"] for f in fresh_sft],
                                        "every token": fresh_swept["every token"]}}
    return payload


def main(seeds=SEEDS, fresh=None):
    torch.set_num_threads(1)  # tiny models: one thread wastes nothing and leaves the other core free
    fresh = fresh_seeds() if fresh is None else fresh
    print(f"[instruct] fresh seeds this run: {fresh}", flush=True)
    runs, fresh_runs = notebook_runs(seeds), notebook_runs(fresh)
    payload = combine(sweep(seeds), runs, seeds, sweep(fresh, control=False),
                      [fresh_runs[str(s)]["report"].get("sft") for s in fresh], fresh)
    payload["rows"] = rows(payload)
    return write_result("instruct", payload)


def _spread(values):
    """Mean ± standard deviation over the seeds, as percentages."""
    values = [v for v in values if v is not None]
    return f"{np.mean(values):.0%} ± {np.std(values, ddof=1):.0%}" if len(values) > 1 else ""


def _range(values):
    return f"{np.mean(values):.1f} ± {np.std(values, ddof=1):.1f}"


def rows(payload):
    """One row per measurement: mean (min-max) over the seeds."""
    out = []
    fresh = payload.get("fresh", {})
    for n in payload.get("n_tasks", []):
        runs = payload["families"][str(n)]
        out.append({"measurement": f"SFT on {n} tasks, spread over the families",
                    **{k: _spread([r[k] for r in runs]) for k in runs[0]},
                    "held-out tasks at the fresh seeds": ", ".join(
                        f"{r['held-out tasks']:.0%}" for r in fresh.get("families", {}).get(str(n), []))})
    for n, runs in payload.get("random draw", {}).items():
        out.append({"measurement": f"SFT on the first {n} tasks drawn at random",
                    **{k: _spread([r[k] for r in runs]) for k in runs[0]}})
    for key, values in payload.get("loss_on", {}).items():
        out.append({"measurement": f"SFT on all tasks, loss on {key}", "held-out tasks": _spread(values),
                    "held-out tasks at the fresh seeds": ", ".join(
                        f"{v:.0%}" for v in fresh.get("loss_on", {}).get(key, []))})
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
