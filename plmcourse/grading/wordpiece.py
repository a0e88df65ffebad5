"""The WordPiece check of notebook 07 (inside a real BERT), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.wordpiece."""

from plmcourse.grading.core import Check

__all__ = ["check_wordpiece"]


check_wordpiece = Check(
    name="check_wordpiece",
    doc="""Check `wordpiece(word, vocab, unk="[UNK]", max_chars=100, lowercase=True) -> list[str]`.
    
    Greedy longest-match-first with "##" on continuation pieces; a word that cannot be
    covered, or longer than max_chars characters (after lower-casing), is [unk] alone;
    lowercase folds case first; an empty word gives [].""",
    arg_names=("word", "vocab"),
)
