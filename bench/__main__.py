"""`python -m bench` (or `python3 tasks.py bench`): run every benchmark, then rewrite bench/RESULTS.md.

`python -m bench attention` runs only the named ones; RESULTS.md is rebuilt from all the
JSON files in bench/results/, so results of benchmarks not rerun are kept.
"""

import sys
import time

from bench import (attention, checkpoints, claims, distill_layers, efficiency, gpt, grading, hub, icl, instruct,
                   minilm, multimodal, nanogpt, notebooks, peft, peft_prompts, peft_unified, prompting,
                   prompting_methods, recorder, report, sentence_families, similarity, simcse, suite, threads, transfer,
                   word2vec, wordpiece)

BENCHMARKS = {
    "attention": attention.main,
    "threads": threads.main,
    "notebooks": notebooks.main,
    "grading": grading.main,
    "recorder": recorder.main,
    "hub": hub.main,
    "gpt": gpt.main,
    "nanogpt": nanogpt.main,
    "word2vec": word2vec.main,
    "wordpiece": wordpiece.main,
    "minilm": minilm.main,
    "checkpoints": checkpoints.main,
    "simcse": simcse.main,
    "sentence_families": sentence_families.main,
    "peft": peft.main,
    "peft_prompts": peft_prompts.main,
    "peft_unified": peft_unified.main,
    "prompting": prompting.main,
    "prompting_methods": prompting_methods.main,
    "prompting_strata_control": prompting_methods.strata_control,
    "icl": icl.main,
    "efficiency": efficiency.main,
    "distill_layers": distill_layers.main,
    "instruct": instruct.main,
    "multimodal": multimodal.main,
    "transfer": transfer.main,
    "claims": claims.main,
    "suite": suite.main,
    "similarity": similarity.main,
    "review_cohort": similarity.review_cohort,
}


def main(argv):
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        sys.exit(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    for name in names:
        print(f"[bench] {name} ...", flush=True)
        start = time.perf_counter()
        path = BENCHMARKS[name]()
        print(f"[bench] wrote {path} ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"[bench] wrote {report.write()}")


main(sys.argv[1:])
