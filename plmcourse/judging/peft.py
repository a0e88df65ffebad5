"""Checks for notebook 09 (parameter-efficient fine-tuning).

    check_lora_linear                  LoRALinear(base, r, alpha, dropout=0.0), a torch.nn.Module
    check_attention_with_prefix        attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None), NumPy
    check_count_trainable_parameters   count_trainable_parameters(model) -> (trainable, total)

A class and a model cannot travel to the judge as plain data, so the first and the last
check are driven (`Check.driver`): in the student's kernel a course-written driver builds
the nn.Linear or the model from plain numbers, exercises the student's class or function on
it, and sends back plain results; the judge compares them with the reference.

check_lora_linear wraps its own nn.Linear (float64 and float32, with and without bias,
in != out and in == out) with r from 1 to more than min(in, out), alpha a multiple of r,
not a multiple, below 1, dropout not passed, 0.0, 0.1 to 0.5, and x (N, in) or (B, T, in).
It holds the class to: the base's weight and bias frozen, A (r, in) and B (out, r)
nn.Parameters of the base's dtype and device and the only parameters that train; B zero
and A random (not zero, not constant) at the start; the output equal to base(x) at the
start, in training mode too; after the check sets A and B, the output in eval mode equal
to base(x) + (alpha / r) x Aᵀ Bᵀ; the gradients of sum(output * upstream) with respect to A
(zero at the start, since B = 0) and B at the start and after setting them; in training
mode, for an x whose rows each hold one nonzero entry, each row of output - base(x) either
zero or the eval-mode update times 1 / (1 - p) (dropout on the low-rank path's input, with
nn.Dropout's rescaling), and at p >= 0.25 some rows of each; merge() returning a new
nn.Linear of the base's dtype and device with weight W + (alpha / r) B A and the base's bias
(none without one), its weight and bias trainable (requires_grad) and its own (no memory shared
with the base or with A and B), the layer and its base unchanged; r = 0 (hidden: r = -2) raising
ValueError in the constructor; and one SGD step over
layer.parameters() moving A and B by the analytic gradients and the base not at all.
A stage that raises (the constructor, forward, backward, setting A and B, merge, the step)
is named with its exception; the stages after it are still run.

check_attention_with_prefix compares output and weights with plmcourse.ref.attention_with_prefix
(the prefix columns first) on: no mask; a padding mask (B, 1, 1, L_k); a causal (L_q, L_k)
mask; a random mask of the scores' shape with queries that may see none of their own keys
(they still see the prefix, so their weights are not zero); a (B, 1, L_q, L_k) mask; P = 1
to 6 (P equal to L_k, and P above it), L_q != L_k, d_v != d_k, B = 1, H = 1 and float32
input. plmcourse.ref.scaled_dot_product_attention (notebook 03's) may be called, locally and
when graded; the course's own prefix attention may not.

check_count_trainable_parameters builds its models from plain descriptions (the same
builder on both sides): an MLP, a frozen encoder under a trainable head, tied input and
output embeddings, BatchNorm's running statistics and a registered buffer, one module
used three times, LoRA-wrapped layers, BitFit, a model with nothing trainable and one with
no parameter at all; the hidden ones have sizes drawn from the salt. The answer must be a
pair of ints (NumPy integers and integer 0-d tensors are accepted; a float is named).
"""

import math

import numpy as np
import torch

from plmcourse import ref
from plmcourse.grading import peft as declared
from plmcourse.grading.peft import BUILD, DROPOUT, FORWARD, INIT, INIT_GRAD, INSPECT, LR, MERGE, SET, STEP, _built
from plmcourse.judging.attention import _random_mask, _tolerance
from plmcourse.judging.core import (
    F32,
    F64,
    Case,
    Spec,
    close,
    compare,
    describe,
    expect_array, expect_float_pair, expect_pair,
    first_match, hint_for, matches, name_mistake, noted,
    hidden_salt,
    to_numpy,
)
from plmcourse.judging.sentence_embeddings import _loaded_class
from plmcourse.nn import attention as nn_attention
from plmcourse.nn import peft as nn_peft
from plmcourse.ref import peft as ref_peft

__all__ = ["check_lora_linear", "check_attention_with_prefix", "check_count_trainable_parameters"]


# ============================================================================
# LoRALinear(base, r, alpha, dropout=0.0)

LORA_SEAL = [
    (nn_peft.LoRALinear, "plmcourse.nn.LoRALinear"),
    (nn_peft.LoRALinear.__init__, "plmcourse.nn.LoRALinear"),
    (nn_peft.LoRALinear.merge, "plmcourse.nn.LoRALinear.merge"),
    (ref_peft.lora_forward, "plmcourse.ref.lora_forward"),
    (ref_peft.lora_merge, "plmcourse.ref.lora_merge"),
]


# Stage names, as the messages say them.


def _lora_seal():
    library = _loaded_class("peft.tuners.lora.layer", "Linear")  # Hugging Face peft, if the notebook loaded it
    return LORA_SEAL + ([(library, "peft's LoRA layer")] if library else [])


def _lora_case(seed, n_in, n_out, r, alpha, device, *, dropout=None, bias=True, dtype=torch.float64, x_shape=(5,)):
    """A base nn.Linear(n_in, n_out) with W ~ N(0, 1/in), known A and B to set, x, a one-hot-like x
    (each row one nonzero entry) for the dropout test, and the upstream of the gradients."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n_out, n_in)) / math.sqrt(n_in)
    b = rng.standard_normal(n_out) if bias else None
    x = rng.standard_normal((*x_shape, n_in))
    rank = max(r, 0)  # r < 1 must raise ValueError; A and B are then empty stand-ins
    A = rng.standard_normal((rank, n_in)) / math.sqrt(n_in)
    B = rng.standard_normal((n_out, rank)) / math.sqrt(max(rank, 1))
    upstream = rng.standard_normal((*x_shape, n_out))
    rows = 48  # at p = 0.25 all kept has probability 1e-6
    x_one = np.zeros((rows, n_in))
    x_one[np.arange(rows), rng.integers(n_in, size=rows)] = rng.choice([-1.0, 1.0], rows) * rng.uniform(0.5, 1.5, rows)
    if len(x_shape) > 1:
        x_one = x_one.reshape(6, 8, n_in)

    def tensor(a):
        return torch.tensor(a, dtype=dtype, device=device)

    args = (tensor(W), None if b is None else tensor(b), r, alpha, tensor(x), tensor(x_one), tensor(A), tensor(B),
            tensor(upstream), seed)
    name = "float32" if dtype == torch.float32 else "float64"
    label = (f"seed {seed}: base nn.Linear({n_in}, {n_out}{'' if bias else ', bias=False'}) {name}, r={r}, "
             f"alpha={alpha}, " + ("dropout not passed" if dropout is None else f"dropout={dropout}")
             + f", x {(*x_shape, n_in)}")
    as64 = {key: None if t is None else to_numpy(t).astype(np.float64)
            for key, t in zip(("W", "b", "x", "x_one", "A", "B", "upstream"), args[:2] + args[4:9])}
    data = {**as64, "r": r, "alpha": alpha, "p": dropout or 0.0, "dtype": dtype, "device": args[0].device,
            "tolerance": F32 if dtype == torch.float32 else F64}
    return Case(label, args, {} if dropout is None else {"dropout": dropout}, data=data)


def _lora_cases(hidden, device):
    cases = [
        _lora_case(0, 6, 4, 2, 4, device),
        _lora_case(1, 5, 7, 3, 8, device, bias=False, dropout=0.0, x_shape=(2, 4)),
        _lora_case(2, 8, 8, 1, 2, device, dropout=0.5),
        _lora_case(3, 6, 5, 4, 16, device, dropout=0.25, x_shape=(3,)),
        _lora_case(4, 4, 6, 2, 8, device, dtype=torch.float32, dropout=0.1, x_shape=(2, 3)),
        _lora_case(5, 3, 2, 5, 10, device, bias=False, dropout=0.5, x_shape=(4,)),
        _lora_case(6, 4, 3, 0, 2, device),  # r = 0: ValueError
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _lora_case(salt + 100, 16, 12, 8, 16, device, bias=False, dropout=0.5, dtype=torch.float32,
                       x_shape=(2, 5)),
            _lora_case(salt + 101, 2, 2, 3, 6, device),
            _lora_case(salt + 102, 10, 3, 1, 0.5, device, dropout=0.3, x_shape=(7,)),
            _lora_case(salt + 103, 7, 9, 6, 32, device, x_shape=(1,)),
            _lora_case(salt + 104, 32, 32, 4, 8, device, dropout=0.5, dtype=torch.float32, x_shape=(4, 8)),
            _lora_case(salt + 105, 5, 5, 0, 1, device, bias=False, dropout=0.1, dtype=torch.float32),
            _lora_case(salt + 106, 3, 6, -2, 4, device),
        ]
    return cases


def _lora_signature_args(case):
    """What stands for LoRALinear(base, r, alpha, dropout=...): the base by its shape, bias and dtype."""
    W, b, r, alpha = case.args[:4]
    base = (tuple(W.shape), b is not None, str(W.dtype))
    return (base, r, alpha), dict(case.kwargs)


# ----------------------------------------------------------------------------
# The driver: runs in the student's kernel


# ----------------------------------------------------------------------------
# The reference and the judge: in the judge's process


def _lora_reference(case):
    """float64 NumPy: base(x), the output with the case's A and B, its gradients, the merged weight."""
    d = case.data
    if d["r"] < 1:
        return {"raises": "ValueError"}
    W, x, A, B, U = d["W"], d["x"], d["A"], d["B"], d["upstream"]
    scale = d["alpha"] / d["r"]
    X, Uf = x.reshape(-1, W.shape[1]), U.reshape(-1, W.shape[0])
    grad_A, grad_B = scale * (Uf @ B).T @ X, scale * Uf.T @ (X @ A.T)
    return {"base": _base(d, x), "y": _base(d, x) + scale * x @ A.T @ B.T, "grad_A": grad_A, "grad_B": grad_B,
            "base_one": _base(d, d["x_one"]), "update_one": scale * d["x_one"] @ A.T @ B.T,
            "merged": W + scale * B @ A, "A_step": A - LR * grad_A, "B_step": B - LR * grad_B}


def _base(d, x):
    return x @ d["W"].T + (0.0 if d["b"] is None else d["b"])


def _raised(got, stage):
    """The sentence for a stage that raised, or None."""
    error = got["errors"].get(stage)
    if error is None:
        return None
    hint = ""
    if error.startswith("NotImplementedError"):
        hint = " (replace the `raise NotImplementedError()` line with your code)"
    elif "shapes cannot be multiplied" in error or "must match the size" in error or "size mismatch" in error:
        hint = (" (A is (r, in) and B (out, r): x @ A.T is (..., r), then @ B.T is (..., out), and B @ A is the "
                "(out, in) update of the weight, never A @ B)")
    return f"{stage} raised {error}{hint}"


def _scales(d):
    """(description, wrong scale) for the known slips in alpha / r."""
    r, alpha = d["r"], d["alpha"]
    return (("the scale alpha / r left out (the update is not multiplied by it)", 1.0),
            ("the scale r / alpha instead of alpha / r", r / alpha),
            ("the scale alpha instead of alpha / r", alpha),
            ("the scale alpha // r, an integer division, instead of alpha / r", alpha // r))


def _output_problem(got, want, d, what):
    """None if `got` is a tensor of the base's dtype and device close to `want`, else the problem."""
    problem = expect_array(got, what, kind="torch")
    if problem:
        return problem
    if got.dtype != d["dtype"]:
        return f"{what} has dtype {got.dtype}, expected {d['dtype']} like the base layer"
    if got.device != torch.device(d["device"]):
        return f"{what} is on {got.device}, expected {d['device']} like the base layer"
    return compare(got, want, **d["tolerance"], what=what)


def _parameters_problem(case, got, expected):
    d = case.data
    if "built" in got:
        return f"calling the class gave {got['built']}, expected a torch.nn.Module (subclass torch.nn.Module)"
    n_out, n_in = d["W"].shape
    shapes = {"A": (d["r"], n_in), "B": (n_out, d["r"])}
    for name, role in (("A", "the down-projection, (r, in_features)"), ("B", "the up-projection, (out_features, r)")):
        value = got[name]
        if value == "missing":
            return f"the layer has no attribute {name}: store {role} as self.{name} = nn.Parameter(...)"
        if not isinstance(value, torch.Tensor):
            return f"self.{name} is {value}, expected an nn.Parameter"
        if not got[f"{name}_parameter"]:
            return (f"self.{name} is a plain tensor, not an nn.Parameter: it is not registered, so "
                    f"layer.parameters() and the optimizer never see it")
        if tuple(value.shape) != shapes[name]:
            transposed = tuple(value.shape) == shapes[name][::-1]
            return (f"self.{name} has shape {tuple(value.shape)}, expected {shapes[name]}"
                    + (": A and B are transposed (A is (r, in), B is (out, r))" if transposed else ""))
        if value.dtype != d["dtype"] or value.device != torch.device(d["device"]):
            return (f"self.{name} is {value.dtype} on {value.device}, expected {d['dtype']} on {d['device']}, "
                    f"the base's dtype and device (dtype=base.weight.dtype, device=base.weight.device)")
    if got["base_trains"]:
        which = " and ".join(got["base_trains"])
        verb = "train" if len(got["base_trains"]) > 1 else "trains"
        return (f"the base layer's {which} still {verb} (requires_grad=True): freeze the base "
                f"(p.requires_grad_(False) for its weight and bias)")
    if sorted(got["trainable"]) != ["A", "B"]:
        return f"the parameters that train are {got['trainable']}, expected A and B only"
    return None


def _initial_values_problem(case, got, expected):
    if not isinstance(got.get("A"), torch.Tensor):
        return None
    A, B = to_numpy(got["A"]).astype(np.float64), to_numpy(got["B"]).astype(np.float64)
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        return "A or B holds NaN or inf at initialisation"
    a_zero, b_zero = not A.any(), not B.any()
    if a_zero and b_zero:
        return ("A and B both start at zero: then no gradient ever reaches A or B (each one's gradient is a "
                "product with the other), so nothing trains; A must start random")
    if a_zero:
        return "A starts at zero and B random, the other way round: A starts random and B at zero"
    if not b_zero:
        return ("B does not start at zero, so the layer does not start equal to the base layer (its output at "
                "initialisation differs from base(x)); create B with torch.zeros")
    if A.size > 1 and np.all(A == A.flat[0]):
        return ("every entry of A starts equal: then A's rows (and B's columns) get equal gradients and stay "
                "equal, so the update has rank 1 at most; A must start random")
    return None


def _init_output_problem(case, got, expected):
    d = case.data
    for key, mode, stage in (("init", "in eval mode", INIT_GRAD), ("y_init_train", "in training mode", INIT)):
        if stage in got["errors"]:
            continue
        y = got[key]["y"] if key == "init" else got[key]
        problem = _output_problem(y, expected["base"], d, f"the output at initialisation {mode}")
        if problem is None:
            continue
        same_shape = isinstance(y, torch.Tensor) and tuple(y.shape) == expected["base"].shape
        if key == "y_init_train" and d["p"] > 0 and same_shape:
            if _zero_or(to_numpy(y), expected["base"] / (1 - d["p"]), d["tolerance"], axis=None):
                return (f"{problem}: dropout is applied to the whole output, the base's included; it belongs on "
                        f"the low-rank path's input only, base(x) + scale * dropout(x) @ A.T @ B.T")
            return (f"{problem}, but B = 0 there, so dropout on the low-rank path's input changes nothing: dropout "
                    f"must act on x inside the update only, never on the base's input or output")
        return f"{problem}; with B = 0 at initialisation the layer must give exactly base(x)"
    return None


def _zero_or(got, kept, tolerance, axis):
    """True if every entry (axis=None) or every row (axis=-1) of `got` is 0 or equal to `kept`'s."""
    with np.errstate(all="ignore"):
        limit = tolerance["atol"] + tolerance["rtol"] * np.abs(kept)
        zero, equal = np.abs(got) <= limit, np.abs(got - kept) <= limit
    if axis is not None:
        zero, equal = zero.all(axis=axis), equal.all(axis=axis)
    return bool(np.all(zero | equal))


def _forward_problem(case, got, expected):
    d = case.data
    if got.get("set") is None:
        return None  # setting A and B raised
    y = got["set"]["y"]
    problem = _output_problem(y, expected["y"], d, "the output after A and B were set (eval mode)")
    if problem is None or not isinstance(y, torch.Tensor) or tuple(y.shape) != expected["y"].shape:
        return problem
    update = d["x"] @ d["A"].T @ d["B"].T
    mistakes = [(what, lambda s=s: (_base(d, d["x"]) + s * update,)) for what, s in _scales(d)]
    mistakes.append(("the base's output left out (only the low-rank update)",
                     lambda: (expected["y"] - expected["base"],)))
    mistake = first_match((y,), mistakes, **d["tolerance"])
    if mistake is None and d["p"] > 0 and _dropout_in_eval(got, expected, d):
        mistake = ("dropout active in eval mode too (model.eval() ignored: F.dropout(x, p) without "
                   "training=self.training, or a mask of one's own); use nn.Dropout, which eval() turns off")
    return matches(problem, mistake)


def _dropout_in_eval(got, expected, d):
    """True if the eval-mode output for one-entry rows drops rows as dropout in training does."""
    report = got.get("dropout")
    if report is None or not isinstance(report.get("eval"), torch.Tensor):
        return False
    update = to_numpy(report["eval"]) - expected["base_one"]
    right = close(update, expected["update_one"], **d["tolerance"])
    return not right and _zero_or(update, expected["update_one"] / (1 - d["p"]), d["tolerance"], axis=-1)


def _gradients_problem(case, got, expected):
    d = case.data
    names = {"A": "A", "B": "B"}
    for key, when, want in (("init", "at initialisation", None), ("set", "after A and B were set", expected)):
        report = got.get(key)
        if report is None:
            continue
        if want is None:  # at initialisation: B = 0, so A's gradient is 0, and B's depends on the layer's own A
            A0 = to_numpy(got["A"]).astype(np.float64)
            X = d["x"].reshape(-1, d["W"].shape[1])
            U = d["upstream"].reshape(-1, d["W"].shape[0])
            want = {"grad_A": np.zeros_like(A0), "grad_B": d["alpha"] / d["r"] * U.T @ (X @ A0.T)}
        for name in names:
            grad = report.get(f"grad_{name}")
            if grad is None:
                return (f"no gradient reaches {name} {when}: use self.{name} itself in forward, not through .data "
                        f"or .detach() or under torch.no_grad()")
            problem = compare(grad, want[f"grad_{name}"], **d["tolerance"],
                              what=f"the gradient of sum(output * upstream) with respect to {name} {when}")
            if problem:
                return problem
    return None


def _dropout_problem(case, got, expected):
    d = case.data
    report = got.get("dropout")
    if report is None:
        return None
    p, tolerance = d["p"], d["tolerance"]
    problem = expect_array(report["train"], "the output in training mode", kind="torch")
    if problem:
        return problem
    what = "in training mode, for an x whose rows each hold one nonzero entry"
    update = to_numpy(report["train"]).astype(np.float64) - expected["base_one"]
    want = expected["update_one"]
    if update.shape != want.shape:
        return f"the output {what} has shape {tuple(report['train'].shape)}, expected {want.shape}"
    if p == 0:
        problem = compare(update, want, **tolerance, what=f"output - base(x) {what}, dropout=0,")
        return problem and f"{problem}: with dropout 0 training mode must give the eval-mode output"
    if _zero_or(update, want / (1 - p), tolerance, axis=-1):
        kept = np.abs(update).max(axis=-1) > tolerance["atol"]
        if p >= 0.25 and (kept.all() or not kept.any()):
            return (f"output - base(x) {what}, dropout={p}, {'keeps' if kept.all() else 'drops'} every one of "
                    f"{kept.size} rows: pass the dropout probability on to nn.Dropout(dropout)")
        return None
    if close(update, want, **tolerance):
        return (f"output - base(x) {what}, dropout={p}, is the eval-mode update in every row: dropout is not "
                f"applied in training mode (pass the dropout probability to nn.Dropout and apply it to x)")
    if _zero_or(update, want, tolerance, axis=-1):
        return (f"output - base(x) {what}, dropout={p}: the kept rows are not rescaled by 1 / (1 - p), as "
                f"nn.Dropout does")
    return (f"output - base(x) {what}, dropout={p}, is not, row by row, either 0 or the eval-mode update times "
            f"1 / (1 - p): dropout must act on the low-rank path's input x (dropout(x) @ A.T @ B.T), not on "
            f"x @ A.T, on the update or on the base")


def _merge_problem(case, got, expected):
    d = case.data
    report = got.get("merge")
    if report is None:
        return None
    tolerance = d["tolerance"]
    if not close(report["base_weight"], d["W"], **tolerance) or (
            d["b"] is not None and not close(report["base_bias"], d["b"], **tolerance)):
        return ("merge() changed the base layer in place; it must return a new nn.Linear and leave the "
                "LoRA layer (and its base) as they were")
    if not report["linear"]:
        return f"merge() returned {report['type']}, expected a new torch.nn.Linear"
    if report["is_base"]:
        return "merge() returned the base layer itself, expected a new torch.nn.Linear"
    weight = report["weight"]
    if weight.dtype != d["dtype"] or weight.device != torch.device(d["device"]):
        return (f"the merged layer's weight is {weight.dtype} on {weight.device}, expected {d['dtype']} on "
                f"{d['device']} like the base (nn.Linear(..., dtype=..., device=...))")
    problem = compare(weight, expected["merged"], **tolerance, what="the merged layer's weight")
    if problem:
        BA = d["B"] @ d["A"]
        mistakes = [(f"{what} in merge()", lambda s=s: (d["W"] + s * BA,)) for what, s in _scales(d)]
        mistakes += [("the update left out of merge() (the base's weight alone)", lambda: (d["W"],)),
                     ("the base's weight left out of merge() (the update alone)",
                      lambda: (expected["merged"] - d["W"],)),
                     ("(B A)ᵀ added in merge(): the update of the (out, in) weight is B @ A",
                      lambda: (d["W"] + d["alpha"] / d["r"] * BA.T,))]
        return name_mistake(problem, (weight,), mistakes, tolerance)
    if d["b"] is None:
        if report["bias"] is not None:
            return "the base has no bias but the merged layer has one: create it with bias=False"
    elif report["bias"] is None:
        return "the merged layer has no bias: the base's bias was dropped; copy it into the new layer"
    elif not close(report["bias"], d["b"], **tolerance):
        return ("the merged layer's bias differs from the base's: a new nn.Linear starts with a random bias, "
                "copy the base's into it")
    if compare(report["y"], expected["y"], **tolerance):
        return "after merge() the LoRA layer's own output changed: merge() must leave the layer as it was"
    if report.get("shared"):
        which = " and ".join(report["shared"])
        return (f"the merged layer's {which} shares its memory with the LoRA layer or its base: merge() returns a "
                f"new nn.Linear holding copies, so that training or changing it leaves the LoRA layer as it was")
    if report.get("frozen"):
        which = " and ".join(report["frozen"])
        return (f"the merged layer's {which} {'do' if len(report['frozen']) > 1 else 'does'} not train "
                f"(requires_grad=False): merge() returns an ordinary new nn.Linear whose weight and bias train, "
                f"as any new layer's do (a copy of the frozen base keeps requires_grad=False)")
    return None


def _step_problem(case, got, expected):
    d = case.data
    report = got.get("step")
    if report is None:
        return None
    for name, want in (("A", expected["A_step"]), ("B", expected["B_step"]), ("base_weight", d["W"])):
        what = "the base's weight" if name == "base_weight" else name
        problem = compare(report[name], want, **d["tolerance"], what=f"{what} after one SGD step (lr={LR})")
        if problem:
            return problem
    return None


# What the judge looks at, the most fundamental first: what the layer holds, what it computes, then
# merge and training; each rule after the stages whose exceptions come before it.
LORA_RULES = (
    ((BUILD, INSPECT), _parameters_problem),
    ((), _initial_values_problem),
    ((INIT,), _init_output_problem),
    ((INIT_GRAD, SET, FORWARD), _forward_problem),
    ((), _gradients_problem),
    ((DROPOUT,), _dropout_problem),
    ((MERGE,), _merge_problem),
    ((STEP,), _step_problem),
)


def _rank_problem(case, got):
    """r < 1: the constructor must raise ValueError."""
    r = case.data["r"]
    error = got["errors"].get(BUILD)
    if error is None:
        return (f"LoRALinear(base, r={r}, ...) built a layer; the rank must be at least 1: raise ValueError for "
                f"r < 1 (a rank-{r} update is no update, and alpha / r divides by zero at r = 0)")
    if error.split(":")[0] != "ValueError":
        return (f"LoRALinear(base, r={r}, ...) raised {error}; raise ValueError yourself for r < 1, with a "
                f"sentence that says the rank must be at least 1")
    return None


def _judge_lora(case, got, expected):
    if not isinstance(got, dict) or not isinstance(got.get("errors"), dict):
        return f"the check could not read what the class gave: {describe(got)}"
    if case.data["r"] < 1:
        return _rank_problem(case, got)
    for stages, rule in LORA_RULES:
        problem = next((p for p in (_raised(got, stage) for stage in stages) if p), None) or rule(case, got, expected)
        if problem:
            return problem
    return None


check_lora_linear = Spec(
    declared.check_lora_linear,
    cases=_lora_cases,
    reference=_lora_reference,
    judge=_judge_lora,
    seal=_lora_seal,
    signature_args=_lora_signature_args,
    clauses=(
        ("the base's weight and bias are frozen", lambda c: c.args[1] is not None),
        ("a base without bias (merge() gives none either)", lambda c: c.args[1] is None),
        ("A (r, in) and B (out, r) of the base's dtype: float64", lambda c: c.data["dtype"] == torch.float64),
        ("... and float32", lambda c: c.data["dtype"] == torch.float32),
        ("in_features != out_features", lambda c: c.data["W"].shape[0] != c.data["W"].shape[1]),
        ("r = 1", lambda c: c.data["r"] == 1),
        ("r = 0 (or less): the constructor raises ValueError", lambda c: c.data["r"] < 1),
        ("merge() returns a new nn.Linear whose weight and bias train (requires_grad=True), copies of their own",
         lambda c: c.data["r"] >= 1),
        ("r larger than min(in, out)", lambda c: c.data["r"] > min(c.data["W"].shape)),
        ("the scale is alpha / r, alpha != r", lambda c: c.data["r"] >= 1 and c.data["alpha"] != c.data["r"]),
        ("... alpha not a multiple of r (no integer division)",
         lambda c: c.data["r"] >= 1 and c.data["alpha"] % c.data["r"] != 0),
        ("dropout not passed: 0.0", lambda c: "dropout" not in c.kwargs),
        ("dropout 0.0 passed", lambda c: c.kwargs.get("dropout") == 0.0),
        ("dropout > 0 on the low-rank path's input, in training mode only", lambda c: c.data["p"] > 0),
        ("x (..., in) with more than two dimensions", lambda c: c.data["x"].ndim > 2),
    ),
)


# ============================================================================
# attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None), NumPy

PREFIX_SEAL = [
    (ref_peft.attention_with_prefix, "plmcourse.ref.attention_with_prefix"),
    (nn_attention.MultiHeadAttention._add_prefix, "plmcourse.nn.MultiHeadAttention's prefix path"),
    (nn_peft.PrefixAttention, "plmcourse.nn.peft.PrefixAttention"),
]


def _prefix_case(seed, B, H, L_q, L_k, d_k, d_v, P, mask=None, dtype=np.float64):
    """q, k, v, prefixes ~ N(0, 1); mask: None, "causal" (L_q, L_k), lengths (B, 1, 1, L_k),
    or rng -> mask."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((B, H, L_q, d_k)), rng.standard_normal((B, H, L_k, d_k))
    v = rng.standard_normal((B, H, L_k, d_v))
    prefix_k, prefix_v = rng.standard_normal((H, P, d_k)), rng.standard_normal((H, P, d_v))
    label = f"seed {seed}: B={B}, H={H}, L_q={L_q}, L_k={L_k}, d_k={d_k}, d_v={d_v}, P={P}"
    if mask == "causal":
        mask = np.tril(np.ones((L_q, L_k), dtype=bool))
        label += f", causal mask {mask.shape}"
    elif isinstance(mask, list):
        label += f", padding mask (B, 1, 1, L_k) for lengths {mask}"
        mask = ref.padding_mask(mask, L_k)
    elif mask is not None:
        mask = mask(rng)
        label += f", mask {mask.shape}"
    no_own_key = mask is not None and not np.broadcast_to(mask, (B, H, L_q, L_k)).any(axis=-1).all()
    label, tags = noted(label, [(no_own_key, " with a query that may see none of its own keys", "no own key"),
                                (dtype == np.float32, ", float32", "float32")])
    arrays = tuple(a.astype(dtype) for a in (q, k, v, prefix_k, prefix_v))
    args = arrays if mask is None else arrays + (mask,)
    data = dict(zip(("q", "k", "v", "prefix_k", "prefix_v"), arrays), mask=mask)
    return Case(label, args, tags=tags, data=data)


def _prefix_cases(hidden):
    cases = [
        _prefix_case(40, 2, 2, 4, 4, 4, 4, 1),
        _prefix_case(43, 3, 2, 4, 6, 4, 4, 4,
                     mask=lambda rng: _random_mask(rng, (3, 2, 4, 6), empty_rows=[(1, 0, 2), (2, 1, 0)])),
        _prefix_case(41, 2, 3, 3, 5, 4, 6, 2, mask=[5, 0]),
        _prefix_case(42, 1, 2, 5, 5, 4, 4, 3, mask="causal"),
        _prefix_case(44, 2, 2, 3, 3, 4, 4, 2, mask=[3, 1], dtype=np.float32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _prefix_case(salt + 50, 4, 4, 6, 8, 8, 8, 5, mask=lambda rng: _random_mask(rng, (4, 1, 6, 8))),
            _prefix_case(salt + 51, 2, 1, 1, 7, 4, 4, 3, mask=[7, 4]),
            _prefix_case(salt + 52, 3, 2, 5, 5, 6, 6, 5, mask="causal"),
            _prefix_case(salt + 53, 2, 3, 4, 2, 3, 5, 6,
                         mask=lambda rng: _random_mask(rng, (2, 3, 4, 2), empty_rows=[(0, 2, 1), (1, 0, 3)])),
        ]
    return cases


def _with_prefix(d, *, after=False, prefix_mask="all", swap=False, batch=None, empty_rows_zero=False,
                 values_from_keys=False, mask_in_front=False):
    """attention_with_prefix with the switches that reproduce known mistakes."""
    q, k, v = (d[n].astype(np.float64) for n in ("q", "k", "v"))
    prefix_k, prefix_v = (d[n].astype(np.float64) for n in ("prefix_k", "prefix_v"))
    if swap:
        prefix_k, prefix_v = prefix_v, prefix_k
    if values_from_keys:
        prefix_v = prefix_k
    B, H, L_q, _ = q.shape
    L_k, P = k.shape[2], prefix_k.shape[1]

    def batched(p):
        return batch(p, B) if batch else np.broadcast_to(p, (B, *p.shape))

    def put(prefix, own, axis):
        return np.concatenate([own, prefix] if after else [prefix, own], axis=axis)

    k, v = put(batched(prefix_k), k, -2), put(batched(prefix_v), v, -2)
    mask = d["mask"]
    own = np.ones((B, H, L_q, L_k), dtype=bool) if mask is None else np.broadcast_to(mask, (B, H, L_q, L_k))
    seen = {"all": np.ones((B, H, L_q, P), dtype=bool), "none": np.zeros((B, H, L_q, P), dtype=bool),
            "first key": np.repeat(own[..., :1], P, axis=-1), "not first key": np.repeat(~own[..., :1], P, axis=-1)}
    # mask_in_front: the keys put after (`after`) while the mask still gets its prefix columns in front
    full = np.concatenate([seen[prefix_mask], own], axis=-1) if mask_in_front else put(seen[prefix_mask], own, -1)
    output, weights = ref.scaled_dot_product_attention(q, k, v, full)
    if empty_rows_zero:
        empty = ~own.any(axis=-1, keepdims=True)
        output, weights = np.where(empty, 0.0, output), np.where(empty, 0.0, weights)
    return output, weights


def _interleaved(prefix, B):
    """np.repeat(prefix, B, axis=0).reshape(B, H, P, d): heads and batch mixed up."""
    return np.repeat(prefix, B, axis=0).reshape(B, *prefix.shape)


def _prefix_mistakes(d):
    B, H = d["q"].shape[:2]
    yield ("the prefix put after the keys: the prefix goes in front of the keys and values, and its columns "
           "come first in the weights", lambda: _with_prefix(d, after=True))
    # Without a mask, the same as the line above; the cases with one tell them apart (run_check).
    yield ("the prefix keys put after the sentence's keys while the mask's prefix columns are in front: the "
           "mask's columns must follow the keys', so the prefix goes in front of the keys and values as its True "
           "columns go in front of the mask", lambda: _with_prefix(d, after=True, mask_in_front=True))
    if B > 1 and H > 1:
        yield ("the prefix repeated over the batch in the wrong order: np.repeat(prefix, B, axis=0).reshape(B, H, "
               "P, d) mixes heads and batch; use np.broadcast_to(prefix, (B, H, P, d))",
               lambda: _with_prefix(d, batch=_interleaved))
    if d["prefix_k"].shape == d["prefix_v"].shape:
        yield "prefix_k and prefix_v swapped", lambda: _with_prefix(d, swap=True)
    if d["prefix_k"].shape == d["prefix_v"].shape:
        yield ("prefix_k used as the prefix values too: the values in front of v are prefix_v",
               lambda: _with_prefix(d, values_from_keys=True))
    yield ("the prefix columns masked out: every query may attend to all P prefix positions, so the mask "
           "gets P True columns in front", lambda: _with_prefix(d, prefix_mask="none"))
    first_key = None if d["mask"] is None else np.broadcast_to(d["mask"], _scores_shape_of(d))[..., 0]
    if first_key is not None and first_key.any() and not first_key.all():  # else the same as all or none
        yield ("the prefix columns copied from the mask's first key column: every query may attend to the "
               "prefix, whatever the mask says", lambda: _with_prefix(d, prefix_mask="first key"))
        yield ("the prefix columns the inverse of the mask's first key column (the prefix visible to padding "
               "only): every query may attend to the prefix", lambda: _with_prefix(d, prefix_mask="not first key"))
    if d["mask"] is not None:
        yield ("zeros for a query that may see none of its own keys, but it still sees the prefix: its weights "
               "are not zero", lambda: _with_prefix(d, empty_rows_zero=True))


def _judge_prefix(case, got, expected):
    problem = expect_float_pair(got)
    if problem:
        return problem
    output, weights = got
    d = case.data
    tolerance = _tolerance(d["q"])
    expected_output, expected_weights = expected
    B, H, L_q, _ = expected_weights.shape
    L_k = d["k"].shape[2]
    if tuple(weights.shape) == (B, H, L_q, L_k):
        return (f"the weights have shape {tuple(weights.shape)}, expected {expected_weights.shape}: L_k columns "
                f"instead of P + L_k, the prefix keys are missing (added to the keys instead of concatenated "
                f"in front of them?)")
    problem = (compare(output, expected_output, **tolerance, what="the output")
               or compare(weights, expected_weights, **tolerance, what="the weights"))
    return problem and name_mistake(problem, (output, weights), _prefix_mistakes(d), tolerance)


def _explain_prefix_error(error):
    return hint_for(error, [
        (("does not broadcast to the scores' shape",),
         "the mask covers the L_k keys only, the scores have P + L_k columns: put P True columns in "
         "front of the mask, since every query may see the prefix"),
        (("input array dimensions", "same number of dimensions"),
         "arrays joined with np.concatenate must agree in every other axis: give the prefix its batch "
         "axis (np.broadcast_to(prefix_k, (B, H, P, d_k))) and broadcast the mask to (B, H, L_q, L_k) "
         "before putting P True columns in front of it"),
        (("could not be broadcast",),
         "the prefix goes in front of the keys and values (np.concatenate along the sequence axis), "
         "it is not added to them"),
    ])


def _scores_shape_of(d):
    B, H, L_q, _ = d["q"].shape
    return (B, H, L_q, d["k"].shape[2])


def _scores_shape(case):
    return _scores_shape_of(case.data)


check_attention_with_prefix = Spec(
    declared.check_attention_with_prefix,
    cases=_prefix_cases,
    reference=lambda case: ref_peft.attention_with_prefix(*case.args),
    judge=_judge_prefix,
    seal=PREFIX_SEAL,
    explain_error=_explain_prefix_error,
    clauses=(
        ("mask None (not passed)", lambda c: c.data["mask"] is None),
        ("a bool mask of the scores' shape (B, H, L_q, L_k)",
         lambda c: c.data["mask"] is not None and c.data["mask"].shape == _scores_shape(c)),
        ("a padding mask (B, 1, 1, L_k) that broadcasts",
         lambda c: c.data["mask"] is not None and c.data["mask"].shape[1:3] == (1, 1)),
        ("a (L_q, L_k) mask", lambda c: c.data["mask"] is not None and c.data["mask"].ndim == 2),
        ("one prefix per head, shared by the batch (B > 1, H > 1)", lambda c: min(c.data["q"].shape[:2]) > 1),
        ("P = 1", lambda c: c.data["prefix_k"].shape[1] == 1),
        ("L_q != L_k", lambda c: c.data["q"].shape[2] != c.data["k"].shape[2]),
        ("d_v != d_k", lambda c: c.data["v"].shape[-1] != c.data["q"].shape[-1]),
        ("a query that may see none of its own keys still sees the prefix", lambda c: "no own key" in c.tags),
        ("float32 input", lambda c: "float32" in c.tags),
    ),
)


# ============================================================================
# count_trainable_parameters(model) -> (trainable, total)

COUNT_SEAL = [(nn_peft.count_trainable_parameters, "plmcourse.nn.count_trainable_parameters")]


def _count_case(label, spec, device, tags=()):
    return Case(f"{label}: {_spec_text(spec)}", (spec, str(device)), tags=frozenset(tags), data={"spec": spec})


def _spec_text(spec):
    kind, *rest = spec
    if kind == "seq":
        return "Sequential(" + ", ".join(_spec_text(s) for s in rest) + ")"
    if kind in ("frozen", "bitfit"):
        return f"{kind}({_spec_text(rest[0])})"
    if kind == "shared":
        return f"one {_spec_text(rest[0])} used {rest[1]} times"
    names = {"linear": "Linear", "embedding": "Embedding", "layernorm": "LayerNorm", "batchnorm": "BatchNorm1d",
             "relu": "ReLU", "buffer": "Linear with a buffer", "tied": "tied embedding and output layer",
             "lora": "LoRALinear"}
    return f"{names[kind]}{tuple(rest) if rest else ''}"


def _count_cases(hidden, device):
    cases = [
        _count_case("an MLP, everything trains", ("seq", ("linear", 8, 16), ("relu",), ("linear", 16, 4)), device,
                    {"nested"}),
        _count_case("a frozen encoder under a trainable head",
                    ("seq", ("frozen", ("seq", ("embedding", 50, 8), ("layernorm", 8), ("linear", 8, 8))),
                     ("linear", 8, 3)), device, {"frozen", "nested"}),
        _count_case("tied weights", ("tied", 30, 6), device, {"tied"}),
        _count_case("buffers", ("seq", ("linear", 5, 7), ("batchnorm", 7), ("buffer", 7, 2, 11)), device,
                    {"buffers"}),
        _count_case("a shared module", ("seq", ("shared", ("linear", 6, 6), 3), ("frozen", ("linear", 6, 2))),
                    device, {"shared", "frozen"}),
        _count_case("LoRA", ("seq", ("lora", 8, 8, 2), ("relu",), ("lora", 8, 4, 1), ("linear", 4, 2)), device,
                    {"lora", "frozen"}),
        _count_case("BitFit", ("bitfit", ("seq", ("linear", 4, 9), ("layernorm", 9), ("linear", 9, 3, False))),
                    device, {"frozen"}),
        _count_case("nothing trains", ("frozen", ("seq", ("linear", 4, 4), ("layernorm", 4))), device,
                    {"nothing trains", "frozen"}),
        _count_case("no parameters at all", ("seq", ("relu",), ("buffer", 0, 0, 3)), device, {"no parameters"}),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        n = np.random.default_rng(salt + 60).integers(2, 40, size=8).tolist()
        cases += [
            _count_case("a frozen tied model", ("seq", ("frozen", ("tied", n[0] + 10, n[1])), ("linear", n[0] + 10, 2)),
                        device, {"tied", "frozen"}),
            _count_case("LoRA beside BatchNorm", ("seq", ("lora", n[2], n[3], 3), ("batchnorm", n[3]),
                                                  ("shared", ("linear", n[3], n[3]), 2)), device,
                        {"lora", "buffers", "shared"}),
            _count_case("nested frozen parts", ("seq", ("seq", ("frozen", ("linear", n[4], n[5])), ("relu",)),
                                                ("bitfit", ("seq", ("linear", n[5], n[6]), ("layernorm", n[6])))),
                        device, {"nested", "frozen"}),
            _count_case("an embedding and a buffer", ("seq", ("embedding", n[7] + 20, n[4]), ("buffer", n[4], 1, 5)),
                        device, {"buffers"}),
        ]
    return cases


def _count_reference(case):
    return nn_peft.count_trainable_parameters(_built(case.data["spec"], "cpu"))


def _count_mistakes(spec, expected):
    trainable, total = expected

    def model():
        return _built(spec, "cpu")

    def every_occurrence():  # each module's own parameters, a module used twice counted twice
        params = [p for _, p in model().named_parameters(remove_duplicate=False)]
        return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)

    def per_module():  # model.modules() yields a shared module once, but a tied tensor under both owners
        params = [p for m in model().modules() for p in m.parameters(recurse=False)]
        return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)

    def state_dict():
        return trainable, sum(t.numel() for t in model().state_dict().values())

    def tensors():
        params = list(model().parameters())
        return sum(1 for p in params if p.requires_grad), len(params)

    yield "(total, trainable) in the wrong order: return (trainable, total)", lambda: (total, trainable)
    yield "frozen parameters counted as trainable: count p.numel() only where p.requires_grad", lambda: (total, total)
    # With nothing frozen and no .grad set yet, (0, total) is both a test on .grad and requires_grad the wrong
    # way round: name both. Otherwise each is named only where the case can show it.
    grads_set = sum(p.numel() for p in model().parameters() if p.grad is not None)
    yield ("no parameter counted as trainable, though every one has requires_grad=True: test p.requires_grad "
           "itself (not p.grad, which stays None until a backward pass, and not its negation)",
           lambda: (0, total) if trainable == total and grads_set == 0 else None)
    yield ("parameters counted by whether their .grad is set: .grad stays None until a backward pass; a parameter "
           "trains when p.requires_grad is True", lambda: (grads_set, total) if grads_set != trainable else None)
    yield ("the frozen parameters counted instead of the trainable ones (requires_grad tested the wrong way "
           "round)", lambda: (total - trainable, total) if trainable < total else None)
    yield ("a tensor shared by two modules (tied weights) counted twice: model.parameters() yields it once, "
           "named_parameters(remove_duplicate=False) and each module's own parameters under each owner",
           per_module)
    yield ("a module used more than once counted once per use: named_parameters(remove_duplicate=False) yields "
           "its parameters every time, model.parameters() once", every_occurrence)
    yield ("buffers counted as parameters: state_dict() also holds buffers (BatchNorm's running statistics) and "
           "tied tensors under each name; count model.parameters()", state_dict)
    yield "tensors counted instead of their entries: count p.numel() for each parameter", tensors


def _count_item(value):
    """(the int, None) for an int-like value, else (None, the problem)."""
    if isinstance(value, torch.Tensor) and value.ndim == 0:
        value = to_numpy(value)[()]
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return None, f"is {value}, a bool, expected an int"
    if isinstance(value, (int, np.integer)):
        return int(value), None
    if isinstance(value, (float, np.floating)):
        if math.isfinite(value) and value == int(value):
            return None, (f"is the float {value}, expected an int: p.numel() is an int (np.prod of a shape gives "
                          f"a float for a 0-d one)")
        return None, f"is {value}, not a whole number: a count of entries is a whole number"
    return None, f"is {describe(value)}, expected an int"


def _judge_count(case, got, expected):
    problem = expect_pair(got, "(trainable, total)")
    if problem:
        return problem
    counts = []
    for value, what in zip(got, ("trainable", "total")):
        count, problem = _count_item(value)
        if problem:
            return f"{what} (item {len(counts) + 1}) {problem}"
        counts.append(count)
    if tuple(counts) == tuple(expected):
        return None
    problem = f"the result is {tuple(counts)}, expected (trainable, total) = {tuple(expected)}"
    for description, compute in _count_mistakes(case.data["spec"], expected):
        candidate = compute()  # None where this case cannot show the mistake
        if candidate is not None and tuple(candidate) == tuple(counts):
            return f"{problem}; it matches {description}"
    return problem


def _count_signature_args(case):
    return (case.data["spec"],), {}


check_count_trainable_parameters = Spec(
    declared.check_count_trainable_parameters,
    cases=_count_cases,
    reference=_count_reference,
    judge=_judge_count,
    seal=COUNT_SEAL,
    signature_args=_count_signature_args,
    clauses=(
        ("numbers of entries, all trainable", lambda c: c.label.startswith("an MLP")),
        ("frozen parameters are not trainable", lambda c: "frozen" in c.tags),
        ("a tensor shared by two modules (tied weights) counted once", lambda c: "tied" in c.tags),
        ("a module used more than once counted once", lambda c: "shared" in c.tags),
        ("buffers are not parameters", lambda c: "buffers" in c.tags),
        ("nested modules", lambda c: "nested" in c.tags),
        ("LoRA-wrapped layers", lambda c: "lora" in c.tags),
        ("nothing trainable: (0, total)", lambda c: "nothing trains" in c.tags),
        ("no parameters at all: (0, 0)", lambda c: "no parameters" in c.tags),
    ),
)
