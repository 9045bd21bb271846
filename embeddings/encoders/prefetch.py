"""Tokenization off the critical path: the next chunk of sentences is tokenized while the device runs this one.

On CUDA only: the fast tokenizer releases the GIL, so a thread overlaps it with the forward passes; on the CPU the
forward keeps every core busy, so the whole list is tokenized once and sorted as a whole."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

CHUNK = 4096  # sentences per background tokenizer call on CUDA


class TokenizedChunks:
    """``(offset, token ids)`` of consecutive chunks of ``chunk`` sentences (``None``: one chunk, tokenized when first
    iterated, in this thread); ``len`` is the number of chunks."""

    def __init__(self, tokenize, sentences: Sequence[str], chunk: int | None) -> None:
        self.tokenize, self.sentences = tokenize, list(sentences)
        self.chunk = chunk if chunk and len(self.sentences) > chunk else None

    def __len__(self) -> int:
        return 1 if self.chunk is None else -(-len(self.sentences) // self.chunk)

    def __iter__(self) -> Iterator[tuple[int, list[list[int]]]]:
        if self.chunk is None:
            yield 0, self.tokenize(self.sentences)
            return
        starts = range(0, len(self.sentences), self.chunk)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sts-tokenize")
        try:  # one worker: chunks are tokenized in order, each while the batches of the previous ones run
            futures: list[Future] = [pool.submit(self.tokenize, self.sentences[s:s + self.chunk]) for s in starts]
            for start, future in zip(starts, futures, strict=True):
                yield start, future.result()
        finally:  # an early stop (a signal, an error in a batch) drops the chunks not started yet
            pool.shutdown(wait=True, cancel_futures=True)


def tokenized_chunks(encoder, sentences: Sequence[str]) -> TokenizedChunks:
    """The chunks ``encoder`` tokenizes ``sentences`` in: several, ahead in a thread, on CUDA; one elsewhere."""
    device = getattr(encoder, "device", None)
    chunk = CHUNK if getattr(device, "type", "cpu") == "cuda" else None
    return TokenizedChunks(encoder.tokenize, sentences, chunk)
