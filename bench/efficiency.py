"""int8 against float32 (notebook 12): file size and forward time of the tiny GPT and of
all-MiniLM-L6-v2 (when installed), with the course's weight-only QuantizedLinear and with
PyTorch's dynamic quantization (int8 weights and activations, int8 matrix products)."""

from __future__ import annotations

import copy
import io
import warnings

import torch

from bench.common import interleaved_medians, write_result
from plmcourse import data
from plmcourse import nn as pnn
from plmcourse.pretrained import load_checkpoint, load_minilm, minilm_available


def size_mb(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes / 1e6


def versions(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is marked deprecated in torch 2.13
        dynamic = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    return {"float32": model, "int8 weights (pnn.QuantizedLinear)": pnn.quantize_linears(copy.deepcopy(model)),
            "int8 dynamic (torch.ao)": dynamic}


def rows_for(name, model, forward):
    models = versions(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds = interleaved_medians({k: (lambda m=m: forward(m)) for k, m in models.items()}, repeats=15)
    return [{"model": name, "weights": k, "MB": round(size_mb(m), 2), "ms per forward": round(1000 * seconds[k], 1)}
            for k, m in models.items()]


def main():
    torch.set_num_threads(2)  # the course's machine: 2 cores
    tiny = load_checkpoint("tiny-gpt", device="cpu")
    ids = torch.tensor(tiny.tokenizer.encode(data.python_corpus()[-40_000:]))
    windows = ids[: 64 * 64].view(64, 64)
    rows = rows_for("tiny GPT (64 windows of 64 characters)", tiny.model.eval(), lambda m: m(windows))
    if minilm_available():
        tokenizer, minilm = load_minilm("cpu")
        batch = pnn.bert_batch(tokenizer, [p.a for p in data.sts_pairs()[:64]], "cpu")
        rows += rows_for("all-MiniLM-L6-v2 (64 sentences)", minilm, lambda m: m(batch[0], attention_mask=batch[1]))
    return write_result("efficiency_int8", {
        "title": "int8 against float32: size and forward time (notebook 12)",
        "notes": "Median of 15 forward passes taken in turns after 2 warm-ups, 2 threads, CPU. MB: the state_dict "
                 "saved with torch.save. The course's QuantizedLinear stores int8 weights and multiplies in float "
                 "(memory only); PyTorch's dynamic quantization multiplies in int8.",
        "rows": rows})


if __name__ == "__main__":
    print(main())
