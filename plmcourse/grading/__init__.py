"""The checks that the notebooks' test cells call: `from plmcourse.grading import check_softmax`.

This folder is what a student's kernel runs of the grading, and all the grading sandbox holds
of it: one module per topic (the same stem as its `plmcourse.ref` / `plmcourse.nn` module and
its tests) that declares each check (name, doc, argument names, the driver of an exercise whose
argument is a class), `core` (the call, the recorder, the connection) and `wire` (plain data).
What only the judge runs (cases, references, mistake catalogues, the engine) is in
`plmcourse.judging`, under the same stems. `CHECKS` is the registry of both: every check's
name and the stem of its two modules. A topic's module is imported the first time a notebook
asks for one of its checks (PEP 562), so a kernel pays only for the checks it uses.

How a check reaches the gradebook:

    student's kernel                              the instructor's side (never runs student code)
    ----------------                              -------------------------------------------
    test cell: check_softmax(softmax)
      |
      |  no judge connected (the student's own kernel, Validate):
      |    plmcourse.judging's Spec runs every case here and prints the verdict: feedback only.
      |
      |  judge connected (`plmcourse grade autograde`: the kernel runs in the sandbox,
      |  plmcourse.autograde.sandbox, with a socket to the judge):
      |    serve():  "check_softmax ran"  ----------->  plmcourse.autograde.judge
      |                                                 runs check_softmax's Spec with a Remote
      |              inputs of case 1  <--------------  (cases, references, tolerances, the
      |    calls softmax, returns plain data ------->    mistake catalogue stay here)
      |              ... every case ...
      |              verdict sentence  <--------------  records pass/fail for this notebook
      |    shows it in the cell (the feedback)
      v                                                        |
    nbgrader writes the notebook and its own score             v
                                                        judge.apply_verdicts replaces nbgrader's
                                                        score of each test cell by the judge's
                                                        -> gradebook.db -> feedback, export
"""

import importlib

# The registry: each check's name -> the stem of its modules in grading/ and judging/.
CHECKS = {
    "check_normalize": "welcome",
    "check_log_softmax": "word_vectors",
    "check_noise_distribution": "word_vectors",
    "check_skipgram_negative_sampling_loss": "word_vectors",
    "check_cross_entropy": "language_models",
    "check_bilm_loss": "language_models",
    "check_scalar_mix": "language_models",
    "check_softmax": "attention",
    "check_scaled_dot_product_attention": "attention",
    "check_causal_mask": "attention",
    "check_multi_head_attention": "attention",
    "check_mlm_mask": "bert",
    "check_mlm_loss": "bert",
    "check_bert_parameter_count": "bert",
    "check_causal_lm_loss": "gpt",
    "check_top_k_filter": "gpt",
    "check_top_p_filter": "gpt",
    "check_text_infilling": "bart",
    "check_prefix_lm_mask": "bart",
    "check_permutation_mask": "bart",
    "check_wordpiece": "wordpiece",
    "check_mean_pool": "sentence_embeddings",
    "check_anisotropy": "sentence_embeddings",
    "check_whitening": "sentence_embeddings",
    "check_info_nce_loss": "sentence_embeddings",
    "check_count_trainable_parameters": "peft",
    "check_lora_linear": "peft",
    "check_attention_with_prefix": "peft",
    "check_verbalizer_log_probs": "prompting",
    "check_pet_soft_labels": "prompting",
    "check_select_pseudo_labels": "prompting",
    "check_k_shot_prompt": "icl",
    "check_induction_score": "icl",
    "check_distillation_loss": "efficiency",
    "check_quantize_int8": "efficiency",
    "check_dequantize": "efficiency",
    "check_alignment_precision_at_1": "transfer",
    "check_whole_entity_mask": "transfer",
    "check_unfreezing_groups": "transfer",
    "check_sft_loss": "instruct",
    "check_bradley_terry_loss": "instruct",
    "check_dpo_loss": "instruct",
    "check_patchify": "multimodal",
    "check_joint_attention_mask": "multimodal",
    "check_clip_loss": "multimodal",
}

__all__ = ["CHECKS", "CheckFailed", *CHECKS]


def __getattr__(name):
    if name == "CheckFailed":
        from plmcourse.grading.core import CheckFailed
        return CheckFailed
    if name in CHECKS:
        return getattr(importlib.import_module(f"plmcourse.grading.{CHECKS[name]}"), name)
    raise AttributeError(f"module 'plmcourse.grading' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
